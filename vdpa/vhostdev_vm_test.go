package vdpa

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// addVDUSE creates a VDUSE device and its vdpa device, bound to vhost_vdpa.
func addVDUSE(t *testing.T, c *Client, name string) (*vduse.Device, string) {
	t.Helper()
	dev, err := vduse.Create(vduse.Config{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddDevice(bg, AddOptions{Name: name, MgmtDev: "vduse"}); err != nil {
		dev.Close()
		t.Fatal(err)
	}
	path, err := VhostVDPAPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return dev, path
}

// TestVMVhostVDPABringUp drives a vhost-vdpa device over VDUSE through the
// virtio status machine, IOTLB mapping (batched) and vring setup up to
// DRIVER_OK, then resets it.
func TestVMVhostVDPABringUp(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vhost_vdpa") {
		return // TestVMVDUSELifecycle checks the error on kernels without vdpa
	}
	c, err := Dial(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fds := testenv.OpenFDs(t)
	dev, path := addVDUSE(t, c, "vhvdpa0")
	defer func() { c.DeleteDevice(bg, "vhvdpa0"); dev.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := OpenVhost(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close() // before the deferred delete: deleting waits for every vhost-vdpa fd to close
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	bf, err := d.NegotiateBackend()
	if err != nil || bf != 1<<linux.VHOST_BACKEND_F_IOTLB_MSG_V2|1<<linux.VHOST_BACKEND_F_IOTLB_BATCH {
		t.Errorf("backend features %#x, %v; want IOTLB_MSG_V2|IOTLB_BATCH", bf, err)
	}
	if id, err := d.DeviceID(); err != nil || id != linux.VIRTIO_ID_NET {
		t.Errorf("device id %d, %v", id, err)
	}
	f, err := d.DeviceFeatures()
	if err != nil || f != vduse.DefaultFeatures {
		t.Errorf("device features %v, %v; want %v", f, err, vduse.DefaultFeatures)
	}
	if n, err := d.VQCount(); err != nil || n != 2 {
		t.Errorf("vq count %d, %v", n, err)
	}
	if n, err := d.MaxVringNum(); err != nil || n != 256 {
		t.Errorf("max ring size %d, %v", n, err)
	}
	if first, last, err := d.IOVARange(); err != nil || first != 0 || last != ^uint64(0) {
		t.Errorf("IOVA range [%#x, %#x], %v", first, last, err)
	}
	if cfg, err := d.Config(0, 6); err != nil || string(cfg) != "\x02\x00\x00\x00\x0d\x01" {
		t.Errorf("config mac % x, %v", cfg, err)
	}
	acked := virtio.Version1 | virtio.AccessPlatform | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetMAC
	if err := d.SetStatus(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER); err != nil {
		t.Fatal(err)
	}
	if err := d.SetFeatures(uint64(acked)); err != nil {
		t.Fatal(err)
	}
	st := uint8(linux.VIRTIO_CONFIG_S_ACKNOWLEDGE | linux.VIRTIO_CONFIG_S_DRIVER | linux.VIRTIO_CONFIG_S_FEATURES_OK)
	if err := d.SetStatus(st); err != nil {
		t.Fatal(err)
	}
	// Guest memory: a memfd, mapped through the IOTLB at IOVA 0.
	mem, err := guest.NewMemory(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	private, _ := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	defer unix.Munmap(private)
	if err := d.Map(1<<30, 1<<20, linux.MappedAddr(private, 0), linux.VHOST_ACCESS_RW); err == nil ||
		!strings.Contains(err.Error(), "not a shared mapping of a file") {
		t.Errorf("mapping private anonymous memory: %v", err)
	}
	before := dev.Requests()
	// Map checks /proc/self/maps and accepts the memfd mapping.
	if err := d.Map(0, 4096, mem.VA(0), linux.VHOST_ACCESS_RW); err != nil {
		t.Fatalf("map a page of the memfd: %v", err)
	}
	if err := d.Unmap(0, 4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Batch(func() error { return d.MapMemory(0, mem, linux.VHOST_ACCESS_RW) }); err != nil {
		t.Fatal(err)
	}
	if dev.Requests() == before {
		t.Error("the batch reached the VDUSE device as no UPDATE_IOTLB")
	}
	var queues []*guest.Queue
	for i := uint32(0); i < 2; i++ {
		q, err := guest.NewQueue(mem, guest.QueueConfig{Num: 256})
		if err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
		desc, avail, used := q.Addrs()
		base := mem.VA(0)
		for _, err := range []error{
			d.SetVringNum(i, 256),
			d.SetVringAddr(i, desc-base, avail-base, used-base, 0, false), // IOVAs
			d.SetVringBase(i, 0),
			d.SetVringKick(i, q.Kick),
			d.SetVringCall(i, q.Call),
			d.EnableVring(i, true),
		} {
			if err != nil {
				t.Fatalf("vq %d: %v", i, err)
			}
		}
	}
	if err := d.SetStatus(st | linux.VIRTIO_CONFIG_S_DRIVER_OK); err != nil {
		t.Fatal(err)
	}
	if dev.Status()&linux.VIRTIO_CONFIG_S_DRIVER_OK == 0 {
		t.Errorf("the VDUSE device saw status %#x, want DRIVER_OK", dev.Status())
	}
	// Packets: the VDUSE device loops every TX frame back to RX, so each
	// frame crosses vhost-vdpa twice: driver -> device and device -> driver.
	rx, tx := queues[0], queues[1]
	for i := 0; i < 8; i++ {
		rx.PushIn(2048)
	}
	rx.Kick1()
	for i := 0; i < 3; i++ {
		frame := guest.IPv4Frame(guest.ProtoUDP, guest.GuestIP, guest.HostIP, 4000, uint16(5000+i), guest.Pattern(700+100*i, byte(i)), false)
		if err := tx.AddOut(append(guest.NetHdr{}.Append(nil, 12), frame...)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Used(5 * time.Second); err != nil {
			t.Fatalf("frame %d: TX not used: %v (device looped %d)", i, err, dev.Looped())
		}
		h, got, err := rx.RecvMergeable(5 * time.Second)
		if err != nil {
			t.Fatalf("frame %d: nothing came back: %v", i, err)
		}
		if string(got) != string(frame) || h.NumBuffers != 1 {
			t.Fatalf("frame %d: got %d bytes (num_buffers %d), want the %d-byte frame", i, len(got), h.NumBuffers, len(frame))
		}
	}
	if dev.Looped() != 3 {
		t.Errorf("device looped %d frames, want 3", dev.Looped())
	}
	cfg, err := c.Config(bg, "vhvdpa0")
	if err != nil || !cfg.HasNegotiated || cfg.Negotiated != acked {
		t.Errorf("negotiated features %v (%v), %v; want %v", cfg.Negotiated, cfg.HasNegotiated, err, acked)
	}
	// A config interrupt reaches the eventfd set with SetConfigCall.
	cfgCall, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err := d.SetConfigCall(cfgCall); err != nil {
		t.Fatal(err)
	}
	if err := dev.InjectConfigIRQ(); err != nil {
		t.Fatal(err)
	}
	pfd := []unix.PollFd{{Fd: int32(cfgCall), Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 5000); n != 1 {
		t.Error("no config interrupt on the config-call eventfd")
	}
	d.SetConfigCall(-1)
	unix.Close(cfgCall)
	if err := d.Suspend(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("suspend on VDUSE: %v, want ErrNotSupported", err)
	}
	if err := d.Reset(); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.Status(); s != 0 || dev.Status() != 0 {
		t.Errorf("after reset: status %#x, VDUSE saw %#x", s, dev.Status())
	}
	// While the vhost-vdpa fd is open, dev del would block: it refuses
	// and names the process instead.
	if hs, err := Holders("vhvdpa0"); err != nil || len(hs) != 1 || hs[0].PID != os.Getpid() || hs[0].Path != path {
		t.Errorf("holders: %+v, %v", hs, err)
	}
	if err := c.DeleteDevice(bg, "vhvdpa0"); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("dev del with the fd open: %v", err)
	}
	d.Close()
	for _, q := range queues {
		q.Close()
	}
	mem.Close()
	if err := c.DeleteDevice(bg, "vhvdpa0"); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open at the end, %d at the start", n, fds)
	}
}

// TestVMSilentVDUSEDoesNotHang: when the VDUSE daemon stops answering,
// opening its vhost-vdpa device gives up at the caller's deadline with a
// clear message instead of blocking for the kernel's msg_timeout.
func TestVMSilentVDUSEDoesNotHang(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vhost_vdpa") {
		return
	}
	c, err := Dial(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev, path := addVDUSE(t, c, "silent0")
	os.WriteFile("/sys/class/vduse/silent0/msg_timeout", []byte("3"), 0)
	dev.SetSilent(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	t0 := time.Now()
	d, err := OpenVhost(ctx, path)
	if err == nil {
		d.Close()
		t.Fatal("opened a device whose daemon does not answer")
	}
	if el := time.Since(t0); el > 2*time.Second || !strings.Contains(err.Error(), "did not answer within the deadline") {
		t.Errorf("after %s: %v", el, err)
	}
	time.Sleep(4 * time.Second) // the kernel gives up (msg_timeout 3 s) and marks the device broken
	c.DeleteDevice(bg, "silent0")
	dev.Close()
}
