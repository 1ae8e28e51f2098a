package vhostnet

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// rig is a vhost-net NIC over a tap in the test's namespace, driven by the
// userspace driver, with an AF_PACKET socket on the tap as the host side.
type rig struct {
	t       *testing.T
	tap     *macvtap.Tap
	ifindex int
	sock    int // host side: receives what the guest sends, sends to the guest
	mem     *guest.Memory
	rx, tx  []*guest.Queue
	nic     *NIC
	hdrLen  int
	logBuf  []byte
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
	r.tap, err = macvtap.CreateTap(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tap.Close() })
	if c.tapOffload != 0 {
		if err := r.tap.SetOffloads(macvtap.Offloads(c.tapOffload)); err != nil {
			t.Fatal(err)
		}
	}
	// No IPv6 chatter (router solicitations, MLD) into the guest's rings.
	os.WriteFile("/proc/sys/net/ipv6/conf/"+r.tap.Name()+"/disable_ipv6", []byte("1"), 0)
	testenv.LinkUp(t, r.tap.Name())
	ifi, err := net.InterfaceByName(r.tap.Name())
	if err != nil {
		t.Fatal(err)
	}
	r.ifindex = ifi.Index
	r.sock = packetSocket(t, ifi.Index)

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

// packetSocket is an AF_PACKET socket bound to the interface.
func packetSocket(t *testing.T, ifindex int) int {
	t.Helper()
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol in bind: no other interface's frames queue up
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s) })
	if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	return s
}

// hostSend transmits a frame on the tap from the host side, so it arrives
// in the guest's RX ring.
func (r *rig) hostSend(frame []byte) {
	r.t.Helper()
	if err := unix.Sendto(r.sock, frame, 0, &unix.SockaddrLinklayer{Ifindex: r.ifindex, Halen: 6,
		Addr: [8]byte{frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]}}); err != nil {
		r.t.Fatalf("host send: %v", err)
	}
}

// hostRecv returns the next frame the host sees on the tap that match
// accepts, or nil after timeout.
func (r *rig) hostRecv(timeout time.Duration, match func([]byte) bool) []byte {
	buf := make([]byte, 128<<10)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(r.sock, buf, 0)
		if err == nil && match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	return nil
}

// guestSend puts a frame with a plain virtio-net header on TX queue q.
func (r *rig) guestSend(q int, hdr guest.NetHdr, frame []byte) {
	r.t.Helper()
	if err := r.tx[q].AddOut(append(hdr.Append(nil, r.hdrLen), frame...)); err != nil {
		r.t.Fatalf("guest send on queue %d: %v", q, err)
	}
}

// isTest matches the test's IPv4 frames from src.
func isTest(src []byte) func([]byte) bool {
	return func(f []byte) bool {
		return len(f) >= 34 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && bytes.Equal(f[26:30], src)
	}
}
