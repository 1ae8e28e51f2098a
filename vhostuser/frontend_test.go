package vhostuser

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

// testFrontend is a minimal vhost-user front-end for the bridge's tests:
// it sends what QEMU sends, with guest memory in a memfd it never maps
// itself, so every mapping of "memfd:vu-test" in this process is the
// bridge's.
type testFrontend struct {
	t     testing.TB
	c     *net.UnixConn
	mem   int    // memfd, memSize bytes
	uaddr uint64 // the front-end's pretend address of the memfd's first byte
	proto ProtocolFeatures
	efd   int // an eventfd sent as every kick, call and err
}

const (
	testMemSize = 1 << 20
	testUaddr   = 0x7f1200000000
	testRingNum = 256
)

func dialFrontend(t testing.TB, path string) *testFrontend {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f := &testFrontend{t: t, c: c, uaddr: testUaddr, mem: memfd(t, "vu-test", testMemSize), efd: eventfd(t)}
	t.Cleanup(func() { c.Close() })
	return f
}

func memfd(t testing.TB, name string, size int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// send writes a request; with NEED_REPLY it reads the REPLY_ACK and
// returns an error for a non-zero one.
func (f *testFrontend) send(r Request, b Body, flags Flags, fds ...int) error {
	f.t.Helper()
	m := NewMessage(r, b, fds...)
	m.Flags |= flags
	if err := WriteMessage(f.c, m); err != nil {
		return err
	}
	if flags&FlagNeedReply == 0 {
		return nil
	}
	rep, err := f.read(r)
	if err != nil {
		return err
	}
	if v := uint64(decodeU64(rep.Payload)); v != 0 {
		return fmt.Errorf("%v: REPLY_ACK %d", r, v)
	}
	return nil
}

// must sends with NEED_REPLY when REPLY_ACK is negotiated and fails the
// test on an error.
func (f *testFrontend) must(r Request, b Body, fds ...int) {
	f.t.Helper()
	var fl Flags
	if f.proto.Has(ProtocolReplyAck) {
		fl = FlagNeedReply
	}
	if err := f.send(r, b, fl, fds...); err != nil {
		f.t.Fatalf("%v: %v", r, err)
	}
}

func decodeU64(p []byte) U64 {
	if len(p) != 8 {
		return U64(^uint64(0))
	}
	return U64(uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56)
}

// read reads the reply to r, with a deadline so that a bridge that never
// answers fails the test instead of hanging it.
func (f *testFrontend) read(r Request) (*Message, error) {
	f.c.SetReadDeadline(time.Now().Add(time.Minute))
	defer f.c.SetReadDeadline(time.Time{})
	m, err := ReadMessage(f.c)
	if err != nil {
		return nil, fmt.Errorf("reply to %v: %w", r, err)
	}
	m.CloseFDs()
	if m.Request != r || m.Flags&FlagReply == 0 {
		return nil, fmt.Errorf("reply to %v: got %v", r, m)
	}
	return m, nil
}

// get sends a request whose reply is mandatory and returns the payload.
func (f *testFrontend) get(r Request, b Body) []byte {
	f.t.Helper()
	if err := WriteMessage(f.c, NewMessage(r, b)); err != nil {
		f.t.Fatal(err)
	}
	m, err := f.read(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return m.Payload
}

func (f *testFrontend) table() MemoryTable {
	return MemoryTable{Regions: []MemRegion{{GuestPhysAddr: 0, Size: testMemSize, UserAddr: f.uaddr, MmapOffset: 0}}}
}

// ringAddr lays ring q out at 16 KiB steps in the memfd.
func (f *testFrontend) ringAddr(q uint32) VringAddr {
	base := f.uaddr + uint64(q)*0x4000
	return VringAddr{Index: q, Desc: base, Avail: base + 0x1000, Used: base + 0x2000}
}

// handshake runs QEMU's sequence for queues queue pairs and returns the
// acknowledged features.
func (f *testFrontend) handshake(queues int) virtio.Features {
	f.t.Helper()
	f.must(SetOwner, nil)
	feat := virtio.Features(decodeU64(f.get(GetFeatures, nil)))
	if uint64(feat)&FeatureProtocolFeatures == 0 {
		f.t.Fatalf("the bridge does not offer PROTOCOL_FEATURES: %v", feat)
	}
	proto := ProtocolFeatures(decodeU64(f.get(GetProtocolFeatures, nil)))
	want := ProtocolMQ | ProtocolReplyAck | ProtocolLogShmFD | ProtocolConfigureMemSlots
	if !proto.Has(want) {
		f.t.Fatalf("protocol features %v, want %v", proto, want)
	}
	f.must(SetProtocolFeatures, U64(want))
	f.proto = want
	if n := decodeU64(f.get(GetQueueNum, nil)); int(n) < queues {
		f.t.Fatalf("GET_QUEUE_NUM %d < %d", n, queues)
	}
	if n := decodeU64(f.get(GetMaxMemSlots, nil)); n == 0 {
		f.t.Fatalf("GET_MAX_MEM_SLOTS %d", n)
	}
	for q := uint32(0); q < uint32(2*queues); q++ {
		f.must(SetVringCall, RingFile{Index: q}, f.efd)
		f.must(SetVringErr, RingFile{Index: q}, f.efd)
	}
	acked := feat & (virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetCsum | virtio.NetGuestCsum |
		virtio.NetGuestTSO4 | virtio.NetHostTSO4 | virtio.Features(FeatureProtocolFeatures))
	f.must(SetFeatures, U64(acked))
	f.must(SetMemTable, f.table(), f.mem)
	for q := uint32(0); q < uint32(2*queues); q++ {
		f.must(SetVringNum, VringState{Index: q, Num: testRingNum})
		f.must(SetVringBase, VringState{Index: q, Num: 0})
		f.must(SetVringAddr, f.ringAddr(q))
		f.must(SetVringKick, RingFile{Index: q}, f.efd)
		f.must(SetVringCall, RingFile{Index: q}, f.efd)
	}
	for q := uint32(0); q < uint32(2*queues); q++ {
		f.must(SetVringEnable, VringState{Index: q, Num: 1})
	}
	return acked
}

// expectClosed waits for the bridge to close the connection.
func (f *testFrontend) expectClosed() {
	f.t.Helper()
	f.c.SetReadDeadline(time.Now().Add(time.Minute))
	var b [64]byte
	for {
		_, err := f.c.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			f.t.Fatal("the bridge kept the connection open")
		}
		return
	}
}

// resources counts this process's open fds and its mappings of the test
// front-ends' memfds.
func resources(t testing.TB) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents), strings.Count(string(b), "memfd:vu-")
}
