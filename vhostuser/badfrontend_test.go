package vhostuser

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

// refused sends a request with NEED_REPLY and checks that the bridge
// refuses it with a failure REPLY_ACK and keeps serving the connection.
func (f *testFrontend) refused(r Request, b Body, fds ...int) {
	f.t.Helper()
	if err := f.send(r, b, FlagNeedReply, fds...); err == nil {
		f.t.Fatalf("%v %#v was accepted", r, b)
	}
	f.get(GetFeatures, nil) // still served
}

// dropped sends raw bytes and fds and checks that the bridge closes the
// connection.
func (f *testFrontend) dropped(b []byte, fds ...int) {
	f.t.Helper()
	rawSend(f.t, f.c, b, fds...)
	f.expectClosed()
}

func msgBytes(m *Message) []byte {
	return append(header(m.Request, m.Flags, uint32(len(m.Payload))), m.Payload...)
}

// setup negotiates REPLY_ACK and CONFIGURE_MEM_SLOTS and gives the bridge
// the test memory and ring 0's size.
func (f *testFrontend) setup() {
	f.t.Helper()
	f.get(GetFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolConfigureMemSlots|ProtocolLogShmFD|ProtocolMQ))
	f.proto = ProtocolReplyAck | ProtocolConfigureMemSlots | ProtocolLogShmFD | ProtocolMQ
	f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
	f.must(SetMemTable, f.table(), f.mem)
	f.must(SetVringNum, VringState{Index: 0, Num: testRingNum})
}

// badFrontends are hostile or broken front-ends. Each gets a fresh
// connection; a refusal must come as a failure REPLY_ACK on a connection
// that stays usable, or as a closed connection.
var badFrontends = []struct {
	name string
	run  func(t *testing.T, f *testFrontend, queues int)
}{
	{"truncated header", func(t *testing.T, f *testFrontend, _ int) {
		rawSend(t, f.c, header(SetFeatures, Version, 8)[:7])
		f.c.CloseWrite()
		f.expectClosed()
	}},
	{"truncated payload with fds", func(t *testing.T, f *testFrontend, _ int) {
		b := msgBytes(NewMessage(SetMemTable, f.table()))
		rawSend(t, f.c, b[:20], f.mem)
		f.c.CloseWrite()
		f.expectClosed()
	}},
	{"payload over the maximum", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(header(SetConfig, Version, 1<<20))
	}},
	{"unknown request", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(header(99, Version, 0))
	}},
	{"memory table with an extra fd", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(msgBytes(NewMessage(SetMemTable, f.table())), f.mem, f.mem)
	}},
	{"memory table with nine regions", func(t *testing.T, f *testFrontend, _ int) {
		m := NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 9)})
		f.dropped(msgBytes(m), f.mem, f.mem, f.mem, f.mem, f.mem, f.mem, f.mem, f.mem)
	}},
	{"nine fds", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(msgBytes(NewMessage(GetFeatures, nil)), f.mem, f.mem, f.mem, f.mem, f.mem, f.mem, f.mem, f.mem, f.mem)
	}},
	{"kick without fd", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(msgBytes(NewMessage(SetVringKick, RingFile{Index: 0})))
	}},
	{"call with an fd and the no-fd flag", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(msgBytes(NewMessage(SetVringCall, RingFile{Index: 0, NoFD: true})), f.efd)
	}},
	{"reply flag from a front-end", func(t *testing.T, f *testFrontend, _ int) {
		f.dropped(msgBytes(NewReply(GetFeatures, nil)))
	}},
	{"GET_VRING_BASE of a ring that does not exist", func(t *testing.T, f *testFrontend, q int) {
		f.dropped(msgBytes(NewMessage(GetVringBase, VringState{Index: uint32(2 * q)})))
	}},
	{"refusal without REPLY_ACK closes", func(t *testing.T, f *testFrontend, q int) {
		f.dropped(msgBytes(NewMessage(SetVringNum, VringState{Index: 0, Num: 3})))
	}},
	{"ring index out of range", func(t *testing.T, f *testFrontend, q int) {
		f.setup()
		f.refused(SetVringNum, VringState{Index: uint32(2 * q), Num: 256})
		f.refused(SetVringKick, RingFile{Index: 255}, f.efd)
		f.refused(SetVringEnable, VringState{Index: uint32(2*q + 1), Num: 1})
	}},
	{"ring sizes", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		for _, n := range []uint32{0, 3, 100, 65536, 1 << 31} {
			f.refused(SetVringNum, VringState{Index: 0, Num: n})
		}
		f.refused(SetVringBase, VringState{Index: 0, Num: 70000})
		f.refused(SetVringEnable, VringState{Index: 0, Num: 2})
	}},
	{"rings outside memory", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		end := f.uaddr + testMemSize
		for _, a := range []VringAddr{
			{Desc: end, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000},                             // desc past the end
			{Desc: end - 0x800, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000},                     // desc straddles the end
			{Desc: f.uaddr, Avail: f.uaddr - 2, Used: f.uaddr + 0x2000},                              // avail before the start
			{Desc: f.uaddr, Avail: f.uaddr + 0x1000, Used: ^uint64(0) - 3},                           // used wraps
			{Desc: 0, Avail: 2, Used: 4},                                                             // guest-physical-looking
			{Desc: f.uaddr + 8, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000},                     // misaligned
			{Desc: f.uaddr, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000, Flags: 1, Log: 1 << 40}, // log outside guest memory
			{Desc: f.uaddr, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000, Flags: 6},               // unknown flags
		} {
			f.refused(SetVringAddr, a)
		}
		// Set before the size: checked when the size comes.
		f.must(SetVringAddr, VringAddr{Index: 1, Desc: end - 0x100, Avail: f.uaddr + 0x1000, Used: f.uaddr + 0x2000})
		f.refused(SetVringNum, VringState{Index: 1, Num: 256})
	}},
	{"bad memory tables", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		big := memfd(t, "vu-big", 2*testMemSize)
		bad := [][]MemRegion{
			{{GuestPhysAddr: 0, Size: 0, UserAddr: f.uaddr}},
			{{GuestPhysAddr: 0, Size: 2 * testMemSize, UserAddr: f.uaddr}},               // beyond the file
			{{GuestPhysAddr: 0, Size: testMemSize, UserAddr: f.uaddr, MmapOffset: 4096}}, // offset + size beyond the file
			{{GuestPhysAddr: ^uint64(0) - 10, Size: 4096, UserAddr: f.uaddr}},            // gpa wraps
			{{GuestPhysAddr: 0, Size: 4096, UserAddr: ^uint64(0) - 10}},                  // uaddr wraps
			{{GuestPhysAddr: 0, Size: 4096, UserAddr: f.uaddr, MmapOffset: ^uint64(0) - 10}},
		}
		for _, regs := range bad {
			f.refused(SetMemTable, MemoryTable{Regions: regs}, f.mem)
		}
		// Two regions overlapping in guest-physical, then in front-end space.
		f.refused(SetMemTable, MemoryTable{Regions: []MemRegion{{0, 0x10000, f.uaddr, 0}, {0x8000, 0x10000, f.uaddr + 0x100000, 0}}}, big, big)
		f.refused(SetMemTable, MemoryTable{Regions: []MemRegion{{0, 0x10000, f.uaddr, 0}, {0x100000, 0x10000, f.uaddr + 0x8000, 0}}}, big, big)
		// Memory that is not a file.
		f.refused(SetMemTable, f.table(), f.efd)
		// The table is still the good one: ring 0 can be placed in it.
		f.must(SetVringAddr, f.ringAddr(0))
	}},
	{"too many regions", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		slots := int(decodeU64(f.get(GetMaxMemSlots, nil)))
		if slots > 64 {
			t.Fatalf("GET_MAX_MEM_SLOTS %d: the test bridge caps it at 4", slots)
		}
		for i := 1; i < slots; i++ {
			f.must(AddMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: uint64(i) << 32, Size: 4096, UserAddr: uint64(i) << 40}}, f.mem)
		}
		f.refused(AddMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 1 << 50, Size: 4096, UserAddr: 1 << 50}}, f.mem)
		f.refused(AddMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 0x1000, Size: 4096, UserAddr: 1 << 50}}, f.mem) // overlaps
		f.refused(RemMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 1 << 50, Size: 4096, UserAddr: 1 << 50}})
		f.must(RemMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 1 << 32, Size: 4096, UserAddr: 1 << 40}})
	}},
	{"features not offered", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		f.refused(SetFeatures, U64(1<<63))
		f.refused(SetFeatures, U64(virtio.AccessPlatform))
		f.refused(SetProtocolFeatures, U64(ProtocolBackendReq))
		f.refused(NetSetMTU, U64(1400))
		f.refused(SetVringKick, RingFile{Index: 0, NoFD: true})
	}},
	{"kick, call, err and log fds that are not eventfds", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(sock)
		for _, fd := range []int{f.mem, sock} {
			f.refused(SetVringKick, RingFile{Index: 0}, fd)
			f.refused(SetVringCall, RingFile{Index: 0}, fd)
			f.refused(SetVringErr, RingFile{Index: 1}, fd)
			f.refused(SetLogFD, nil, fd)
		}
		// A memory region that is a socket or a directory.
		dir, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dir)
		f.refused(SetMemTable, f.table(), sock)
		f.refused(SetMemTable, f.table(), dir)
		f.must(SetVringKick, RingFile{Index: 0}, f.efd)
	}},
	{"memory shrunk under running rings", func(t *testing.T, f *testFrontend, q int) {
		// The front-end truncates its memfd after the bridge mapped it and
		// kicks: vhost-net's worker (on 6.12 a thread of this process)
		// then faults past the file's end. The kernel turns that into
		// EFAULT for vhost, not a SIGBUS for this process; netctl itself
		// never touches guest memory.
		f.handshake(q)
		if err := unix.Ftruncate(f.mem, 0); err != nil {
			t.Fatal(err)
		}
		one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
		if _, err := unix.Write(f.efd, one); err != nil {
			t.Fatal(err)
		}
		// GET_VRING_BASE detaches each ring, which waits for vhost's worker.
		for r := uint32(0); r < uint32(2*q); r++ {
			f.get(GetVringBase, VringState{Index: r})
		}
		f.get(GetFeatures, nil) // still served
	}},
	{"dirty log too small", func(t *testing.T, f *testFrontend, _ int) {
		f.setup()
		f.must(AddMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 1 << 36, Size: 4096, UserAddr: 1 << 40}}, f.mem)
		log := memfd(t, "vu-log", 4096)
		// SET_LOG_BASE has a mandatory reply: a refusal closes.
		f.dropped(msgBytes(NewMessage(SetLogBase, Log{MmapSize: 4096})), log)
	}},
	{"stops mid-handshake", func(t *testing.T, f *testFrontend, q int) {
		f.setup()
		f.must(SetVringAddr, f.ringAddr(0))
		f.must(SetVringKick, RingFile{Index: 0}, f.efd)
		f.must(SetVringCall, RingFile{Index: 0}, f.efd)
		f.must(SetVringEnable, VringState{Index: 0, Num: 1})
		log := memfd(t, "vu-log", 4096)
		if err := WriteMessage(f.c, NewMessage(SetLogBase, Log{MmapSize: 4096}, log)); err != nil {
			t.Fatal(err)
		}
		f.read(SetLogBase)
		f.must(SetLogFD, nil, f.efd)
		f.c.Close() // gone, with ring 0 running and memory and a log mapped
	}},
}

// runBadFrontends runs every bad front-end against r's bridge, each on its
// own connection, and checks that no fd and no mapping outlives it and
// that the bridge then serves a good front-end.
func runBadFrontends(t *testing.T, r *rig, queues int) {
	sessions := r.b.Status().Sessions
	for _, c := range badFrontends {
		fds0, maps0 := resources(t)
		t.Run(c.name, func(t *testing.T) {
			f := dialFrontend(t, r.path)
			c.run(t, f, queues)
			f.c.Close()
			sessions++
			r.waitIdle(t, sessions)
		})
		if fds, maps := resources(t); fds > fds0 || maps != maps0 {
			t.Errorf("%s: %d fds and %d front-end mappings afterwards, %d and %d before", c.name, fds, maps, fds0, maps0)
		}
	}
	f := dialFrontend(t, r.path)
	f.handshake(queues)
	f.c.Close()
	r.waitIdle(t, sessions+1)
	if st := r.b.Status(); st.Sessions != sessions+1 {
		t.Errorf("status %+v: want %d sessions", st, sessions+1)
	}
}

func TestBadFrontends(t *testing.T) {
	r := startBridge(t, 2, func(c *Config) { c.MaxMemSlots = 4 })
	runBadFrontends(t, r, 2)
}

var _ = unix.Close
