package selftest

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
)

// TestVMSelftestTwoQueues: every frame arrives once and byte for byte both
// ways on both queues, and the report holds what the kernel read back.
func TestVMSelftestTwoQueues(t *testing.T) {
	k := testenv.VM(t)
	fds := testenv.OpenFDs(t)
	base := runtime.NumGoroutine()
	rep, err := Run(t.Context(), Options{Queues: 2, Frames: 500})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Kernel, k.Name) || len(rep.Queues) != 2 {
		t.Errorf("kernel %q, %d queues", rep.Kernel, len(rep.Queues))
	}
	if rep.Offered == 0 || !rep.Offered.Has(rep.Acked) || rep.AckedHex != "0x120008000" {
		t.Errorf("offered %v, acked %v (%s): want VERSION_1|MRG_RXBUF|EVENT_IDX, all offered", rep.Offered, rep.Acked, rep.AckedHex)
	}
	if !slices.Equal(rep.AckedInEffect, []string{"EVENT_IDX", "MRG_RXBUF"}) {
		t.Errorf("acked in effect %v, want EVENT_IDX and MRG_RXBUF", rep.AckedInEffect)
	}
	if rep.HeaderSize != 12 || !slices.Contains(rep.TapFlags, "VNET_HDR") || !slices.Contains(rep.TapFlags, "MULTI_QUEUE") {
		t.Errorf("header %d, tap flags %v", rep.HeaderSize, rep.TapFlags)
	}
	if !slices.Equal(rep.TapOffloads, []string{"csum", "tso4", "tso6"}) {
		t.Errorf("tap offloads read back %v (ethtool %v), want csum tso4 tso6", rep.TapOffloads, rep.TapFeatures)
	}
	for _, d := range []Direction{rep.GuestToHost, rep.HostToGuest} {
		if d.Planned != 1000 || d.Sent != 1000 || d.Received != 1000 || d.Lost+d.Corrupted+d.Duplicate != 0 {
			t.Errorf("%+v, want 1000 frames intact", d)
		}
	}
	var rx uint64
	for _, q := range rep.Queues {
		if q.TXSent != 500 || q.TXUsed != 500 || q.TXPackets != 500 || q.TXBytes != 500*1514 {
			t.Errorf("queue %d: %+v", q.Queue, q)
		}
		rx += q.RXPackets
	}
	if rx != 1000 {
		t.Errorf("the queues received %d frames host to guest, want 1000", rx)
	}
	t.Logf("kernel %s: %+v %+v, RX per queue %d/%d", k.Name, rep.GuestToHost, rep.HostToGuest, rep.Queues[0].RXPackets, rep.Queues[1].RXPackets)
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the selftest, %d before", n, fds)
	}
	if n := goroutinesBackTo(base); n > base {
		t.Errorf("%d goroutines after the selftest, %d before", n, base)
	}
}

// TestVMSelftestFailsOnLoss: with the NIC stopped (backends detached)
// nothing moves, and the selftest fails saying how many frames were lost
// each way, instead of passing.
func TestVMSelftestFailsOnLoss(t *testing.T) {
	testenv.VM(t)
	base := runtime.NumGoroutine()
	rep, err := Run(t.Context(), Options{Frames: 50, inject: func(phase string, nic *vhostnet.NIC, _ *macvtap.Tap) error {
		if phase == "tx" {
			return nic.Stop()
		}
		return nil
	}})
	if err == nil || rep == nil {
		t.Fatalf("a stopped NIC passed the selftest: %v", err)
	}
	for _, want := range []string{"guest to host: 50 of 50 frames lost", "host to guest: 50 of 50 frames lost"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := goroutinesBackTo(base); n > base {
		t.Errorf("%d goroutines after the selftest, %d before", n, base)
	}
}

// TestVMSelftestFailsOnHeaderMismatch: a tap whose header size no longer
// matches vhost-net's (10 instead of 12) garbles every frame to the guest;
// the selftest sees it, while guest to host still passes.
func TestVMSelftestFailsOnHeaderMismatch(t *testing.T) {
	testenv.VM(t)
	rep, err := Run(t.Context(), Options{Frames: 50, inject: func(phase string, _ *vhostnet.NIC, tap *macvtap.Tap) error {
		if phase == "rx" {
			return tap.SetVnetHdrSize(10)
		}
		return nil
	}})
	if err == nil || rep == nil || !strings.Contains(err.Error(), "host to guest: 50 of 50 frames lost") || strings.Contains(err.Error(), "guest to host") {
		t.Fatalf("got %v, want host to guest to fail with all 50 frames lost, and guest to host to pass", err)
	}
	if rep.GuestToHost.Received != 50 {
		t.Errorf("guest to host %+v, want 50 intact", rep.GuestToHost)
	}
	t.Logf("%v", err)
}

// TestVMSelftestErrorPathsEndGoroutines: a run that fails in the middle of
// either phase leaves no goroutine and no fd behind.
func TestVMSelftestErrorPathsEndGoroutines(t *testing.T) {
	testenv.VM(t)
	errInjected := errors.New("injected")
	for _, at := range []string{"tx", "rx"} {
		fds := testenv.OpenFDs(t)
		base := runtime.NumGoroutine()
		_, err := Run(t.Context(), Options{Frames: 10, inject: func(phase string, _ *vhostnet.NIC, _ *macvtap.Tap) error {
			if phase == at {
				return errInjected
			}
			return nil
		}})
		if !errors.Is(err, errInjected) {
			t.Errorf("failing %s: %v", at, err)
		}
		if n := goroutinesBackTo(base); n > base {
			buf := make([]byte, 1<<16)
			t.Errorf("failing %s: %d goroutines left, %d before:\n%s", at, n, base, buf[:runtime.Stack(buf, true)])
		}
		if n := testenv.OpenFDs(t); n != fds {
			t.Errorf("failing %s: %d fds open, %d before", at, n, fds)
		}
	}
}
