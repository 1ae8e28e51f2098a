package vhostuser

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair returns the two ends of a connected AF_UNIX stream socket.
func socketPair(t testing.TB) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b = conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func eventfd(t testing.TB) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// qemuHandshake is the start of what QEMU 7.2's vhost-user-net front-end
// sends (hw/virtio/vhost-user.c vhost_user_backend_init, vhost_dev_init,
// vhost_dev_start), laid out as QEMU lays it out; fds marks how many fds
// come with each.
func qemuHandshake() []*Message {
	var out []*Message
	add := func(r Request, b Body, fds int, flags Flags) {
		m := NewMessage(r, b)
		m.Flags |= flags
		m.FDs = make([]int, fds)
		out = append(out, m)
	}
	add(SetOwner, nil, 0, 0)
	add(GetFeatures, nil, 0, 0)
	add(GetProtocolFeatures, nil, 0, 0)
	add(SetProtocolFeatures, U64(ProtocolMQ|ProtocolReplyAck|ProtocolLogShmFD|ProtocolConfigureMemSlots), 0, 0)
	add(GetQueueNum, nil, 0, 0)
	add(GetMaxMemSlots, nil, 0, 0)
	add(SetVringCall, RingFile{Index: 0}, 1, 0)
	add(SetVringErr, RingFile{Index: 1}, 1, 0)
	add(SetFeatures, U64(0x1_4000_8000|1<<30), 0, FlagNeedReply)
	add(SetMemTable, MemoryTable{Regions: []MemRegion{{0, 0xa0000, 0x7f0000000000, 0}, {0xc0000, 0x7ff40000, 0x7f00000c0000, 0xc0000}}}, 2, FlagNeedReply)
	add(AddMemReg, SingleMemRegion{Region: MemRegion{0x100000000, 0x40000000, 0x7f8000000000, 0}}, 1, FlagNeedReply)
	add(RemMemReg, SingleMemRegion{Region: MemRegion{0x100000000, 0x40000000, 0x7f8000000000, 0}}, 1, FlagNeedReply)
	add(SetVringNum, VringState{Index: 0, Num: 256}, 0, FlagNeedReply)
	add(SetVringBase, VringState{Index: 0, Num: 0}, 0, FlagNeedReply)
	add(SetVringAddr, VringAddr{Index: 0, Desc: 0x7f0000010000, Used: 0x7f0000011000, Avail: 0x7f0000012000}, 0, FlagNeedReply)
	add(SetVringKick, RingFile{Index: 0}, 1, FlagNeedReply)
	add(SetVringCall, RingFile{Index: 0, NoFD: true}, 0, FlagNeedReply)
	add(SetVringEnable, VringState{Index: 0, Num: 1}, 0, FlagNeedReply)
	add(SetLogBase, Log{MmapSize: 0x8000, MmapOffset: 0}, 1, 0)
	add(SetLogFD, nil, 1, 0)
	add(GetVringBase, VringState{Index: 0}, 0, 0)
	add(ResetOwner, nil, 0, 0)
	return out
}

func TestRoundTrip(t *testing.T) {
	a, b := socketPair(t)
	efd := eventfd(t)
	for _, m := range qemuHandshake() {
		for i := range m.FDs {
			m.FDs[i] = efd
		}
		if err := WriteMessage(a, m); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMessage(b)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if got.Header != m.Header || !bytes.Equal(got.Payload, m.Payload) || len(got.FDs) != len(m.FDs) {
			t.Errorf("sent %v, read %v", m, got)
		}
		for _, fd := range got.FDs {
			if fd == efd {
				t.Errorf("%v: the received fd is the sender's number %d, not a new one", m, fd)
			}
		}
		body, err := Decode(got)
		if err != nil {
			t.Errorf("%v: %v", m, err)
		} else if !bytes.Equal(body.Encode(), m.Payload) {
			t.Errorf("%v: decoded %#v encodes to %x, want %x", m, body, body.Encode(), m.Payload)
		}
		got.CloseFDs()
	}
}

func TestDecodeBodies(t *testing.T) {
	m := NewMessage(SetVringAddr, VringAddr{Index: 3, Flags: VringAddrFlagLog, Desc: 1, Used: 2, Avail: 3, Log: 4})
	b, err := Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := (VringAddr{Index: 3, Flags: 1, Desc: 1, Used: 2, Avail: 3, Log: 4}); b != want {
		t.Fatalf("got %#v, want %#v", b, want)
	}
	// The wire order is desc, used, avail.
	if got := binary.LittleEndian.Uint64(m.Payload[16:]); got != 2 {
		t.Errorf("used at offset 16 is %d, want 2", got)
	}
	tab := MemoryTable{Regions: []MemRegion{{1, 2, 3, 4}, {5, 6, 7, 8}}}
	m = NewMessage(SetMemTable, tab, -1, -1)
	b, err = Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, tab) {
		t.Errorf("got %#v, want %#v", b, tab)
	}
}

// TestDecodeHostile feeds Decode every malformed shape and checks each is
// refused with a DecodeError that wraps ErrInvalid.
func TestDecodeHostile(t *testing.T) {
	with := func(m *Message, f func(m *Message)) *Message { f(m); return m }
	cases := map[string]*Message{
		"version 0":          with(NewMessage(GetFeatures, nil), func(m *Message) { m.Flags = 0 }),
		"version 2":          with(NewMessage(GetFeatures, nil), func(m *Message) { m.Flags = 2 }),
		"reply flag":         with(NewMessage(GetFeatures, nil), func(m *Message) { m.Flags |= FlagReply }),
		"size mismatch":      with(NewMessage(SetFeatures, U64(1)), func(m *Message) { m.Size = 4 }),
		"unknown request":    NewMessage(Request(999), nil),
		"backend request":    NewMessage(SetBackendReqFD, nil, 3),
		"u64 short":          with(NewMessage(SetFeatures, U64(1)), func(m *Message) { m.Payload = m.Payload[:7]; m.Size = 7 }),
		"u64 with fd":        NewMessage(SetFeatures, U64(1), 5),
		"get with payload":   with(NewMessage(GetFeatures, U64(0)), func(m *Message) {}),
		"state long":         with(NewMessage(SetVringNum, VringAddr{}), func(m *Message) {}),
		"addr short":         with(NewMessage(SetVringAddr, VringState{}), func(m *Message) {}),
		"kick without fd":    NewMessage(SetVringKick, RingFile{Index: 0}),
		"kick nofd with fd":  NewMessage(SetVringKick, RingFile{Index: 0, NoFD: true}, 4),
		"kick two fds":       NewMessage(SetVringCall, RingFile{Index: 0}, 4, 5),
		"kick high bits":     NewMessage(SetVringKick, U64(1<<9), 4),
		"table no regions":   NewMessage(SetMemTable, MemoryTable{}),
		"table 9 regions":    NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 9)}, 1, 2, 3, 4, 5, 6, 7, 8),
		"table fd short":     NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 2)}, 1),
		"table fd extra":     NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 1)}, 1, 2),
		"table truncated":    with(NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 2)}, 1, 2), func(m *Message) { m.Payload = m.Payload[:40]; m.Size = 40 }),
		"table count lies":   with(NewMessage(SetMemTable, MemoryTable{Regions: make([]MemRegion, 1)}, 1), func(m *Message) { m.Payload[0] = 2 }),
		"table header short": with(NewMessage(SetMemTable, U64(0)), func(m *Message) { m.Payload = m.Payload[:4]; m.Size = 4 }),
		"add reg no fd":      NewMessage(AddMemReg, SingleMemRegion{}),
		"rem reg two fds":    NewMessage(RemMemReg, SingleMemRegion{}, 1, 2),
		"log no fd":          NewMessage(SetLogBase, Log{}),
		"log fd no fd":       NewMessage(SetLogFD, nil),
		"config short":       with(NewMessage(GetConfig, U64(0)), func(m *Message) {}),
		"config size lies":   with(NewMessage(GetConfig, ConfigSpace{Size: 4, Data: []byte{1}}), func(m *Message) {}),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(m)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%v) = %v, want a DecodeError wrapping ErrInvalid", m, err)
			}
		})
	}
}

// openFDs counts this process's open fds.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rawSend writes bytes and fds with one sendmsg, bypassing WriteMessage's
// checks, as a hostile front-end would.
func rawSend(t testing.TB, c *net.UnixConn, b []byte, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		t.Fatal(err)
	}
}

func header(r Request, flags Flags, size uint32) []byte {
	b := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint32(b[0:], uint32(r))
	binary.LittleEndian.PutUint32(b[4:], uint32(flags))
	binary.LittleEndian.PutUint32(b[8:], size)
	return b
}

func TestReadMessageBounds(t *testing.T) {
	efd := eventfd(t)
	t.Run("payload over the maximum", func(t *testing.T) {
		a, b := socketPair(t)
		before := openFDs(t)
		rawSend(t, a, header(SetMemTable, Version, MaxPayload+1), efd, efd)
		_, err := ReadMessage(b)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
		if n := openFDs(t); n != before {
			t.Errorf("%d fds open after the refusal, %d before: the message's fds leaked", n, before)
		}
	})
	t.Run("nine fds", func(t *testing.T) {
		a, b := socketPair(t)
		before := openFDs(t)
		fds := []int{efd, efd, efd, efd, efd, efd, efd, efd, efd}
		rawSend(t, a, header(SetMemTable, Version, 0), fds...)
		_, err := ReadMessage(b)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
		if n := openFDs(t); n != before {
			t.Errorf("%d fds open after the refusal, %d before", n, before)
		}
	})
	t.Run("truncated header", func(t *testing.T) {
		a, b := socketPair(t)
		rawSend(t, a, header(GetFeatures, Version, 0)[:7])
		a.CloseWrite()
		_, err := ReadMessage(b)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("truncated payload with fd", func(t *testing.T) {
		a, b := socketPair(t)
		before := openFDs(t)
		rawSend(t, a, append(header(SetLogBase, Version, LogSize), 1, 2, 3), efd)
		a.CloseWrite()
		_, err := ReadMessage(b)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
		if n := openFDs(t); n != before {
			t.Errorf("%d fds open after the refusal, %d before", n, before)
		}
	})
	t.Run("clean end", func(t *testing.T) {
		a, b := socketPair(t)
		a.CloseWrite()
		if _, err := ReadMessage(b); err != io.EOF {
			t.Fatalf("got %v, want io.EOF", err)
		}
	})
	t.Run("header in two writes", func(t *testing.T) {
		a, b := socketPair(t)
		h := header(SetFeatures, Version, 8)
		rawSend(t, a, h[:5], efd)
		rawSend(t, a, append(h[5:], U64(7).Encode()...))
		m, err := ReadMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		defer m.CloseFDs()
		if m.Request != SetFeatures || len(m.FDs) != 1 || binary.LittleEndian.Uint64(m.Payload) != 7 {
			t.Fatalf("got %v", m)
		}
	})
}

func TestWriteMessageBounds(t *testing.T) {
	a, _ := socketPair(t)
	if err := WriteMessage(a, &Message{Header: Header{Request: SetConfig}, Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized payload: %v", err)
	}
	if err := WriteMessage(a, &Message{Header: Header{Request: SetMemTable}, FDs: make([]int, MaxFDs+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nine fds: %v", err)
	}
}

func TestNames(t *testing.T) {
	if s := SetMemTable.String(); s != "SET_MEM_TABLE" {
		t.Error(s)
	}
	if s := Request(500).String(); s != "request 500" {
		t.Error(s)
	}
	if s := (ProtocolMQ | ProtocolReplyAck | 1<<40).String(); s != "MQ|REPLY_ACK|bit 40" {
		t.Error(s)
	}
	if s := (Version | FlagNeedReply | 0x100).String(); s != "v1|NEED_REPLY|0x100" {
		t.Error(s)
	}
}
