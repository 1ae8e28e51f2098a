package vhostnet

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
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
	injectFailure = func(s string) error { steps = append(steps, s); return nil }
	defer func() { injectFailure = nil }()
	n, err := NewNIC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if len(steps) < 30 {
		t.Fatalf("only %d setup steps recorded: %v", len(steps), steps)
	}
	for _, s := range steps {
		fds := testenv.OpenFDs(t)
		injectFailure = func(x string) error {
			if x == s {
				return errInjected
			}
			return nil
		}
		n, err := NewNIC(cfg)
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
	injectFailure = nil
	// Nothing was left attached to the tap: a new NIC passes traffic.
	r.nic, err = NewNIC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(300, 7), false)
	r.guestSend(1, guest.NetHdr{}, want)
	if got := r.hostRecv(5*time.Second, isTest(guest.GuestIP)); string(got) != string(want) {
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
			r.hostSend(f)
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
