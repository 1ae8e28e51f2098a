package vhostuser

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// dpFrontend is a front-end with real rings: the userspace virtio driver
// (vhostnet/guest) in a memfd, so that packets really cross the bridge.
type dpFrontend struct {
	*testFrontend
	mem     *guest.Memory
	rx, tx  []*guest.Queue
	logUsed bool // rings are set up with VHOST_VRING_F_LOG
}

// dialDataPath connects and sets up queues queue pairs with VERSION_1
// (a 12-byte header), every ring enabled.
func dialDataPath(t *testing.T, path string, queues int) *dpFrontend {
	return dialDataPathLog(t, path, queues, false)
}

// dialDataPathLog is dialDataPath with, when logShmFD, LOG_SHMFD
// negotiated. The rings start unlogged: QEMU sets VHOST_VRING_F_LOG only
// once the log is there (logRings).
func dialDataPathLog(t *testing.T, path string, queues int, logShmFD bool) *dpFrontend {
	return dialDataPathOpts(t, path, queues, dpOpts{logShmFD: logShmFD})
}

// dpOpts vary dialDataPath's front-end.
type dpOpts struct {
	logShmFD bool // LOG_SHMFD negotiated
	// tight: the TX rings have 16 buffers and the memory table ends at
	// the page after the last TX ring's, so that a larger TX ring (4096
	// entries and up) does not fit where its descriptor table is.
	tight bool
}

// dialDataPathOpts is dialDataPath with opts.
func dialDataPathOpts(t *testing.T, path string, queues int, opts dpOpts) *dpFrontend {
	t.Helper()
	logShmFD := opts.logShmFD
	f := &dpFrontend{testFrontend: dialFrontend(t, path)}
	var err error
	if f.mem, err = guest.NewMemory(16 << 20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.mem.Close() })
	var txCfg guest.QueueConfig
	if opts.tight {
		txCfg.Slots = 16
	}
	for i := 0; i < queues; i++ {
		rx, err := guest.NewQueue(f.mem, guest.QueueConfig{})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := guest.NewQueue(f.mem, txCfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rx.Close)
		t.Cleanup(tx.Close)
		f.rx, f.tx = append(f.rx, rx), append(f.tx, tx)
	}
	f.must(SetOwner, nil)
	f.get(GetFeatures, nil)
	f.get(GetProtocolFeatures, nil)
	proto := ProtocolReplyAck | ProtocolMQ
	if logShmFD {
		proto |= ProtocolLogShmFD
	}
	f.must(SetProtocolFeatures, U64(proto)) // REPLY_ACK counts from the next message on
	f.proto = proto
	f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
	size := uint64(len(f.mem.Buf))
	if opts.tight {
		end, err := f.mem.Alloc(0, 4096) // where the next page would start
		if err != nil {
			t.Fatal(err)
		}
		size = uint64(end)
	}
	f.must(SetMemTable, MemoryTable{Regions: []MemRegion{{GuestPhysAddr: 0, Size: size, UserAddr: f.mem.VA(0)}}}, f.mem.FD())
	for i := 0; i < queues; i++ {
		for j, q := range []*guest.Queue{f.rx[i], f.tx[i]} {
			f.startRing(uint32(2*i+j), q, 0)
		}
	}
	for q := uint32(0); q < uint32(2*queues); q++ {
		f.must(SetVringEnable, VringState{Index: q, Num: 1})
	}
	return f
}

// startRing gives the bridge ring idx's size, base, addresses (asking for
// the used ring to be logged when f.logUsed) and eventfds.
func (f *dpFrontend) startRing(idx uint32, q *guest.Queue, base uint16) {
	d, a, u := q.Addrs()
	f.must(SetVringNum, VringState{Index: idx, Num: uint32(q.Num())})
	f.must(SetVringBase, VringState{Index: idx, Num: uint32(base)})
	addr := VringAddr{Index: idx, Desc: d, Avail: a, Used: u}
	if f.logUsed {
		addr.Flags, addr.Log = VringAddrFlagLog, q.UsedGPA()
	}
	f.must(SetVringAddr, addr)
	f.must(SetVringCall, RingFile{Index: idx}, q.CallFD())
	f.must(SetVringKick, RingFile{Index: idx}, q.KickFD())
}

// logRings sends every ring's addresses again with its used ring logged,
// as QEMU's vhost_dev_set_log does once migration has given the back-end
// its log; rings started later are logged too.
func (f *dpFrontend) logRings() {
	f.logUsed = true
	for i := range f.rx {
		for j, q := range []*guest.Queue{f.rx[i], f.tx[i]} {
			d, a, u := q.Addrs()
			f.must(SetVringAddr, VringAddr{Index: uint32(2*i + j), Desc: d, Avail: a, Used: u, Flags: VringAddrFlagLog, Log: q.UsedGPA()})
		}
	}
}

// newHostSide brings the tap name up and opens its host side.
func newHostSide(t *testing.T, name string) *hostside.Side {
	t.Helper()
	hostside.Up(t, name)
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return hostside.New(t, ifi.Index)
}

// framesBothWays sends a frame from each TX ring to the host and one from
// the host into each RX ring (the tap spreads host frames over its
// queues, so every RX ring gets buffers and the frame must land in one).
func framesBothWays(t *testing.T, f *dpFrontend, h *hostside.Side, seed byte) {
	t.Helper()
	for q := range f.tx {
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000+uint16(q), 5000, guest.Pattern(1000, seed+byte(q)), false)
		if err := f.tx[q].AddOut(append(guest.NetHdr{}.Append(nil, 12), want...)); err != nil {
			t.Fatal(err)
		}
		if h.Recv(time.Minute, hostside.Is(want)) == nil {
			t.Fatalf("queue pair %d: the host did not receive the guest's frame", q)
		}
	}
	for q := range f.rx {
		for f.rx[q].Free() > 0 {
			if err := f.rx[q].AddIn(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(1200, seed+100), false)
	h.Send(want)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		for q := range f.rx {
			if el, ok, err := f.rx[q].Poll(); err == nil && ok {
				if len(el.Data) >= 12 && bytes.Equal(el.Data[12:], want) {
					return
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no RX ring received the host's frame")
}
