package vhostnet

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

var errInjected = errors.New("injected failure")

// TestVMSetupFailureLeavesNoFD fails NewNIC at every one of its steps in
// turn: each failure names its step, and leaves no fd open and no backend
// attached (a NIC built afterwards carries traffic).
func TestVMSetupFailureLeavesNoFD(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2, features: virtio.Version1 | virtio.LogAll, logAll: true})
	cfg := r.nic.cfg
	r.nic.Close()
	var steps []string
	n, err := newNIC(cfg, func(s string) error { steps = append(steps, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if len(steps) < 30 {
		t.Fatalf("only %d setup steps recorded: %v", len(steps), steps)
	}
	for _, s := range steps {
		fds := testenv.OpenFDs(t)
		n, err := newNIC(cfg, func(x string) error {
			if x == s {
				return errInjected
			}
			return nil
		})
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), s) {
			t.Errorf("failing %q: got %v", s, err)
			if n != nil {
				n.Close()
			}
			continue
		}
		if got := testenv.OpenFDs(t); got != fds {
			t.Errorf("failing %q left %d fds open (%d before)", s, got, fds)
		}
	}
	// Nothing was left attached to the tap: a new NIC passes traffic.
	if n, err = NewNIC(cfg); err != nil {
		t.Fatal(err)
	}
	r.nic = n
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(300, 7), false)
	r.guestSend(1, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); string(got) != string(want) {
		t.Fatal("no traffic through a NIC built after the injected failures")
	}
	t.Logf("%d setup steps, each failed once", len(steps))
}

// TestVMDetachUnderTraffic stops and restarts the NIC while the host
// floods the guest: no ring error, RX resumes after Start, and the ring
// position vhost reports at Stop matches what the driver saw used.
func TestVMDetachUnderTraffic(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1})
	rx := r.rx[0]
	for rx.Free() > 0 {
		rx.PushIn(2048)
	}
	rx.Kick1()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(600, 5), false)
		for i := 0; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r.host.Send(f)
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	recv := func(d time.Duration) int {
		n := 0
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			_, ok, err := rx.Poll()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				time.Sleep(time.Millisecond)
				continue
			}
			n++
			rx.PushIn(2048)
			rx.Kick1()
		}
		return n
	}
	before := recv(300 * time.Millisecond)
	if err := r.nic.Stop(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok, _ := rx.Poll(); !ok {
			break
		}
		before++
		rx.PushIn(2048)
	}
	if base := r.nic.Bases()[0][0]; base != rx.DeviceUsedIdx() {
		t.Errorf("RX ring stopped at avail %d but the device used %d buffers", base, rx.DeviceUsedIdx())
	}
	stopped := recv(100 * time.Millisecond)
	if err := r.nic.Start(); err != nil {
		t.Fatal(err)
	}
	rx.Notify()
	after := recv(300 * time.Millisecond)
	t.Logf("received %d before Stop, %d while stopped, %d after Start", before, stopped, after)
	if before == 0 || after == 0 {
		t.Errorf("traffic before (%d) and after (%d) the restart, want both", before, after)
	}
	if stopped != 0 {
		t.Errorf("%d frames arrived while the NIC was stopped", stopped)
	}
}

// TestVMZeroEventFDsBindNothing: a Vring whose Kick, Call and Err are left
// zero binds no eventfd (not fd 0): NewNIC succeeds, RX works with the
// driver polling the used ring, and vhost never signals the driver's own
// call eventfd.
func TestVMZeroEventFDsBindNothing(t *testing.T) {
	k := testenv.VM(t)
	r := newRig(t, rigConfig{features: virtio.Version1})
	cfg := r.nic.cfg.clone()
	r.nic.Close()
	rx := cfg.Queues[0].RX
	cfg.Queues[0].RX = Vring{Num: rx.Num, Base: rx.Base, Addr: rx.Addr}
	n, err := NewNIC(cfg)
	if err != nil {
		t.Fatalf("kernel %s: NewNIC with zero-valued eventfds: %v", k.Name, err)
	}
	r.nic = n
	q := r.rx[0]
	for i := 0; i < 8; i++ {
		q.PushIn(2048)
	}
	want := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(400, 3), false)
	r.host.Send(want)
	el, err := q.Used(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(el.Data) < 12 || !bytes.Equal(el.Data[12:], want) {
		t.Fatalf("guest got %d bytes, want a header and the %d-byte frame", len(el.Data), len(want))
	}
	if n := q.Interrupts; n != 0 {
		t.Errorf("%d interrupts on the driver's call eventfd, which was not given to vhost", n)
	}
}

// TestVMConfigCopied: changing the caller's config slices after NewNIC
// changes nothing: Stop and Start use the NIC's own copy.
func TestVMConfigCopied(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1})
	cfg := r.nic.cfg.clone()
	r.nic.Close()
	n, err := NewNIC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.nic = n
	cfg.Queues[0].Backend = 1 << 20
	cfg.Queues[0].TX.Num = 3
	cfg.Memory[0].Size = 0
	if err := r.nic.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.nic.Start(); err != nil {
		t.Fatalf("Start after the caller changed its config: %v", err)
	}
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(300, 8), false)
	r.guestSend(0, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatal("no traffic after Stop/Start")
	}
}

// TestVMDeviceAfterClose: Device after Close or out of range is an error,
// not a panic.
func TestVMDeviceAfterClose(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2, features: virtio.Version1})
	if _, err := r.nic.Device(2); !errors.Is(err, ErrInvalid) {
		t.Errorf("Device(2) of 2 queue pairs: %v, want ErrInvalid", err)
	}
	d, err := r.nic.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	r.nic.Close()
	if _, err := r.nic.Device(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Device(0) after Close: %v, want ErrClosed", err)
	}
	if _, err := d.Features(); !errors.Is(err, ErrClosed) {
		t.Errorf("a device of a closed NIC: %v, want ErrClosed", err)
	}
}

// TestVMMemTableValidated: the kernel takes overlapping and wrapping tables
// silently; SetMemTable refuses them with ErrInvalid and leaves the table
// in place, and valid multi-region tables still work.
func TestVMMemTableValidated(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1})
	d, err := r.nic.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(len(r.mem.Buf))
	ua := r.mem.VA(0)
	for name, tab := range map[string][]MemoryRegion{
		"overlap":  {{0, size, ua}, {size / 2, size / 2, ua}},
		"gpa wrap": {{0, size, ua}, {^uint64(0) - 4095, 8192, ua}},
		"uva wrap": {{0, size, ^uint64(0) - 4095}},
		"size 0":   {{0, size, ua}, {1 << 40, 0, ua}},
	} {
		if err := d.SetMemTable(tab); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	send := func(seq int) {
		t.Helper()
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, uint16(5000+seq), guest.Pattern(500, byte(seq)), false)
		r.guestSend(0, guest.NetHdr{}, want)
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("frame %d did not arrive byte for byte", seq)
		}
	}
	send(1)
	// A valid table of two halves, and one with a gap above: traffic goes on.
	half := size / 2
	if err := d.SetMemTable([]MemoryRegion{{half, half, ua + half}, {0, half, ua}, {1 << 40, 4096, ua}}); err != nil {
		t.Fatal(err)
	}
	send(2)
}
