package vhostnet

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// rig is a vhost-net NIC over a tap in the test's namespace, driven by the
// userspace driver, with an AF_PACKET socket on the tap as the host side.
type rig struct {
	t      *testing.T
	tap    *macvtap.Tap
	host   *hostside.Side // receives what the guest sends, sends to the guest
	mem    *guest.Memory
	rx, tx []*guest.Queue
	nic    *NIC
	hdrLen int
	logBuf []byte
}

type rigConfig struct {
	queues     int
	features   virtio.Features
	rx, tx     guest.QueueConfig
	tapOffload uint32
	logAll     bool
	noVnetHdr  bool // a tap without IFF_VNET_HDR (vhost adds the header: bit 27)
}

func newRig(t *testing.T, c rigConfig) *rig {
	t.Helper()
	testenv.VM(t)
	testenv.Host(t)
	if c.queues == 0 {
		c.queues = 1
	}
	r := &rig{t: t, hdrLen: 10}
	if c.features&(virtio.Version1|virtio.NetMrgRxbuf) != 0 {
		r.hdrLen = 12
	}
	var err error
	tc := macvtap.TapConfig{Name: "vhrig%d", VnetHdr: true, VnetHdrSize: r.hdrLen, Queues: c.queues}
	if c.noVnetHdr {
		tc.VnetHdr, tc.VnetHdrSize = false, 0
	}
	r.tap, r.host = hostside.NewTap(t, tc)
	if c.tapOffload != 0 {
		if err := r.tap.SetOffloads(macvtap.Offloads(c.tapOffload)); err != nil {
			t.Fatal(err)
		}
	}

	r.mem, err = guest.NewMemory(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mem.Close() })
	cfg := NICConfig{Features: c.features,
		Memory: []MemoryRegion{{GuestPhysAddr: 0, Size: uint64(len(r.mem.Buf)), UserAddr: r.mem.VA(0)}}}
	if c.logAll {
		pages := len(r.mem.Buf) / 4096
		r.logBuf, err = unix.Mmap(-1, 0, (pages/8+4095)&^4095, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(r.logBuf) })
		cfg.LogBase = linux.MappedAddr(r.logBuf, 0)
	}
	for i := 0; i < c.queues; i++ {
		rxq, err := guest.NewQueue(r.mem, c.rx)
		if err != nil {
			t.Fatal(err)
		}
		txq, err := guest.NewQueue(r.mem, c.tx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rxq.Close)
		t.Cleanup(txq.Close)
		r.rx, r.tx = append(r.rx, rxq), append(r.tx, txq)
		qp := NewQueuePair(rxq, txq, r.tap.QueueFD(i))
		if c.logAll {
			qp.RX.Addr.LogUsed, qp.RX.Addr.Log = true, rxq.UsedGPA()
			qp.TX.Addr.LogUsed, qp.TX.Addr.Log = true, txq.UsedGPA()
		}
		cfg.Queues = append(cfg.Queues, qp)
	}
	r.nic, err = NewNIC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.nic.Close() })
	return r
}

// guestSend puts a frame with a plain virtio-net header on TX queue q.
func (r *rig) guestSend(q int, hdr guest.NetHdr, frame []byte) {
	r.t.Helper()
	if err := r.tx[q].AddOut(append(hdr.Append(nil, r.hdrLen), frame...)); err != nil {
		r.t.Fatalf("guest send on queue %d: %v", q, err)
	}
}
