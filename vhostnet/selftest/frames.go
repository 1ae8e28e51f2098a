package selftest

import (
	"bytes"
	"encoding/binary"

	"github.com/netctl/netctl/vhostnet/guest"
)

// Test frames are UDP over IPv4. Queue pair q's flow is guest port 4000+q
// to host port 5001, in both directions (tun steers the host's replies to
// the queue that sent the flow). The payload starts with the frame's
// sequence number (4 bytes) and queue (2 bytes); the rest is a pattern
// seeded by the sequence number, so every frame has its own bytes.
const (
	guestPort = 4000
	hostPort  = 5001
	headLen   = 14 + 20 + 8 // Ethernet, IPv4, UDP
)

// testFrame builds frame seq of queue q, guest to host (toGuest false) or
// host to guest, size bytes long.
func testFrame(toGuest bool, q, seq, size int) []byte {
	p := guest.Pattern(size-headLen, byte(seq*31+q))
	binary.BigEndian.PutUint32(p[0:], uint32(seq))
	binary.BigEndian.PutUint16(p[4:], uint16(q))
	if toGuest {
		return guest.IPv4Frame(guest.ProtoUDP, guest.HostIP, guest.GuestIP, hostPort, uint16(guestPort+q), p, false)
	}
	return guest.IPv4Frame(guest.ProtoUDP, guest.GuestIP, guest.HostIP, uint16(guestPort+q), hostPort, p, false)
}

// tally checks the frames one direction delivered against what was sent:
// each must arrive once, byte for byte. Its memory is one bit per frame
// sent (at most MaxQueues*MaxFrames bits). Not safe for concurrent use.
type tally struct {
	toGuest  bool
	size     int
	queues   int
	frames   int      // per queue
	seen     [][]byte // per queue: a bit per sequence number
	intact   []uint64 // per queue (by the flow's queue)
	bytes    []uint64
	corrupt  uint64 // ours (by address and port) with a wrong length or wrong bytes
	dup      uint64
	received uint64 // intact, first time
}

func newTally(toGuest bool, queues, frames, size int) *tally {
	t := &tally{toGuest: toGuest, size: size, queues: queues, frames: frames,
		seen: make([][]byte, queues), intact: make([]uint64, queues), bytes: make([]uint64, queues)}
	for q := range t.seen {
		t.seen[q] = make([]byte, (frames+7)/8)
	}
	return t
}

// ours reports whether f belongs to this direction's test flows, and the
// queue pair whose flow it is.
func (t *tally) ours(f []byte) (int, bool) {
	if len(f) < headLen || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != guest.ProtoUDP {
		return 0, false
	}
	src, dst, port, other := guest.GuestIP, guest.HostIP, binary.BigEndian.Uint16(f[34:]), binary.BigEndian.Uint16(f[36:])
	if t.toGuest {
		src, dst, port, other = guest.HostIP, guest.GuestIP, other, port
	}
	if !bytes.Equal(f[26:30], src) || !bytes.Equal(f[30:34], dst) || other != hostPort {
		return 0, false
	}
	q := int(port) - guestPort
	return q, q >= 0 && q < t.queues
}

// add records one frame; frames of other flows are ignored (false).
func (t *tally) add(f []byte) bool {
	q, ok := t.ours(f)
	if !ok {
		return false
	}
	if len(f) != t.size {
		t.corrupt++
		return true
	}
	seq := int(binary.BigEndian.Uint32(f[headLen:]))
	if seq >= t.frames || !bytes.Equal(f, testFrame(t.toGuest, q, seq, t.size)) {
		t.corrupt++
		return true
	}
	if t.seen[q][seq/8]&(1<<(seq%8)) != 0 {
		t.dup++
		return true
	}
	t.seen[q][seq/8] |= 1 << (seq % 8)
	t.intact[q]++
	t.bytes[q] += uint64(len(f))
	t.received++
	return true
}
