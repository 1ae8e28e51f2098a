package vdpa

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
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
	c := vdpaClient(t, "vhost_vdpa")
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
	// VDUSE maps by virtual address: found through the node's device number.
	if d.MapMode() != MapVA || d.DeviceName() != "vhvdpa0" {
		t.Errorf("map mode %v, device %q; want va, vhvdpa0", d.MapMode(), d.DeviceName())
	}
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
	// The config space is 24 bytes: a read past it, or one whose length
	// would wrap, is refused before the ioctl.
	if n, err := d.ConfigSize(); err != nil || n != 24 {
		t.Errorf("config size %d, %v; want 24", n, err)
	}
	for _, r := range [][2]uint32{{20, 8}, {0, 0}, {0, 0xfffffff9}} {
		if _, err := d.Config(r[0], r[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Config(%d, %d): %v, want ErrInvalid", r[0], r[1], err)
		}
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
	if err := d.Map(1<<30, 1<<20, linux.MappedAddr(private, 0), linux.VHOST_ACCESS_RW); !errors.Is(err, ErrInvalid) ||
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
	if _, err := d.Status(); !errors.Is(err, ErrClosed) {
		t.Errorf("Status after Close: %v, want ErrClosed", err)
	}
	// A copy of the node made with mknod elsewhere (as in a container's
	// /dev) is the same device: Holders finds it by st_rdev, and dev del
	// refuses while it is open.
	var nst unix.Stat_t
	if err := unix.Stat(path, &nst); err != nil {
		t.Fatal(err)
	}
	cp := t.TempDir() + "/vdpa-copy"
	if err := unix.Mknod(cp, unix.S_IFCHR|0o600, int(nst.Rdev)); err != nil {
		t.Fatal(err)
	}
	if name, err := DeviceOfVhost(cp); err != nil || name != "vhvdpa0" {
		t.Errorf("DeviceOfVhost(%s) = %q, %v", cp, name, err)
	}
	d2, err := OpenVhost(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if d2.MapMode() != MapVA || d2.DeviceName() != "vhvdpa0" {
		t.Errorf("through the copy: map mode %v, device %q", d2.MapMode(), d2.DeviceName())
	}
	if hs, err := Holders("vhvdpa0"); err != nil || len(hs) != 1 || hs[0].PID != os.Getpid() || hs[0].Path != cp {
		t.Errorf("holders through the copy: %+v, %v", hs, err)
	}
	if err := c.DeleteDevice(bg, "vhvdpa0"); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), cp) {
		t.Errorf("dev del with the copy open: %v", err)
	}
	d2.Close()
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
	c := vdpaClient(t, "vhost_vdpa")
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
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OpenVhost past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(t0); el > 2*time.Second || !strings.Contains(err.Error(), "did not answer within the deadline") {
		t.Errorf("after %s: %v", el, err)
	}
	time.Sleep(4 * time.Second) // the kernel gives up (msg_timeout 3 s) and marks the device broken
	c.DeleteDevice(bg, "silent0")
	dev.Close()
}

// TestVMDeleteDeviceDeadline: a vhost-vdpa fd that no process table shows
// (in flight in an SCM_RIGHTS message) holds the kernel's delete; the
// delete gives up at the caller's deadline with ErrBusy, the client stays
// usable, and the device goes once the fd is closed.
func TestVMDeleteDeviceDeadline(t *testing.T) {
	c := vdpaClient(t, "vhost_vdpa")
	dev, path := addVDUSE(t, c, "held0")
	defer dev.Close()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	d, err := OpenVhost(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.RLock()
	err = unix.Sendmsg(sp[0], []byte{0}, unix.UnixRights(d.fd), nil, 0)
	d.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	d.Close() // the only reference left is the one in flight
	var release sync.Once
	releaseFD := func() { release.Do(func() { unix.Close(sp[0]); unix.Close(sp[1]) }) } // drops the message and its fd
	watchdog := time.AfterFunc(30*time.Second, releaseFD)                               // never leave the VM hung
	defer watchdog.Stop()
	defer releaseFD()
	if hs, err := Holders("held0"); err != nil || len(hs) != 0 {
		t.Fatalf("holders with the fd in flight: %+v, %v", hs, err)
	}
	short, cancel2 := context.WithTimeout(bg, 2*time.Second)
	defer cancel2()
	t0 := time.Now()
	err = c.DeleteDevice(short, "held0")
	if el := time.Since(t0); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || el > 5*time.Second {
		t.Errorf("dev del with the fd in flight, after %s: %v; want ErrBusy at the 2 s deadline", el, err)
	}
	// While the kernel holds the delete, it holds every vdpa request: a
	// call returns at its own deadline instead of hanging.
	short2, cancel3 := context.WithTimeout(bg, time.Second)
	defer cancel3()
	t0 = time.Now()
	_, err = c.Device(short2, "held0")
	// (Linux 6.12: the delete holds the family's device lock while it
	// waits, so dev show waits too.)
	if el := time.Since(t0); !errors.Is(err, context.DeadlineExceeded) || el > 3*time.Second {
		t.Errorf("dev show while the delete is held: after %s: %v; want the 1 s deadline", el, err)
	}
	releaseFD() // the kernel's delete goes on
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(bg, time.Second)
		_, err := c.Device(ctx, "held0")
		cancel()
		if errors.Is(err, os.ErrNotExist) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the device is still there 10 s after its last fd closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
