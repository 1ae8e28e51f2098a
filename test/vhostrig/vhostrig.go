// Package vhostrig gives tests a kernel vhost-net NIC whose rings this
// process drives: vhostnet/guest's userspace driver plays the guest, and a
// multiqueue tap in the test's network namespace is the backend. The stats
// and exporter VM tests use it to load one queue pair's vhost worker and
// check the workers' CPU time around that load (CheckWorkerCPU).
package vhostrig

import (
	"net"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// Rig is a running vhost-net NIC of Pairs queue pairs on Tap. Everything
// it holds (the tap's fds, the guest memory, the rings, the vhost-net fds)
// is closed by the test's cleanup.
type Rig struct {
	Tap     *macvtap.Tap
	Ifindex int // the tap's ifindex (0 if it could not be read)
	Mem     *guest.Memory
	RX, TX  []*guest.Queue // per queue pair
	NIC     *vhostnet.NIC
}

// New creates a tap named after tapPattern ("stw%d"), up, with a 12-byte
// vnet header and pairs queues, and a VERSION_1 vhost-net NIC on it. The
// caller must be in the test's network namespace (testenv.Host).
func New(t testing.TB, tapPattern string, pairs int) *Rig {
	t.Helper()
	r := &Rig{}
	var err error
	r.Tap, err = macvtap.CreateTap(macvtap.TapConfig{Name: tapPattern, VnetHdr: true, VnetHdrSize: 12, Queues: pairs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Tap.Close() })
	testenv.LinkUp(t, r.Tap.Name())
	if ifi, err := net.InterfaceByName(r.Tap.Name()); err == nil {
		r.Ifindex = ifi.Index
	}
	r.Mem, err = guest.NewMemory(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Mem.Close() })
	cfg := vhostnet.NICConfig{Features: virtio.Version1,
		Memory: []vhostnet.MemoryRegion{{GuestPhysAddr: 0, Size: uint64(len(r.Mem.Buf)), UserAddr: r.Mem.VA(0)}}}
	for i := 0; i < pairs; i++ {
		rxq, err := guest.NewQueue(r.Mem, guest.QueueConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rxq.Close)
		txq, err := guest.NewQueue(r.Mem, guest.QueueConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(txq.Close)
		r.RX, r.TX = append(r.RX, rxq), append(r.TX, txq)
		cfg.Queues = append(cfg.Queues, vhostnet.NewQueuePair(rxq, txq, r.Tap.QueueFD(i)))
	}
	r.NIC, err = vhostnet.NewNIC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.NIC.Close() })
	return r
}

// Send pushes n UDP frames of 1400 bytes through pair's TX ring and waits
// until vhost-net has used them all (each wait bounded by 5 s).
func (r *Rig) Send(t testing.TB, pair, n int) {
	t.Helper()
	tx := r.TX[pair]
	frame := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4001, 5000, guest.Pattern(1400, 1), false)
	pkt := append(guest.NetHdr{}.Append(nil, 12), frame...)
	for sent := 0; sent < n; sent++ {
		for tx.Free() == 0 {
			if _, err := tx.Used(5 * time.Second); err != nil {
				t.Fatalf("pair %d, after %d frames: %v", pair, sent, err)
			}
		}
		if err := tx.AddOut(pkt); err != nil {
			t.Fatal(err)
		}
	}
	for tx.Pending() > 0 {
		if _, err := tx.Used(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
