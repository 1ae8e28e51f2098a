package guest

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/linux"
)

// fakeDevice plays the device side of a queue in-process: it walks the next
// available chain (direct or indirect), reads its readable part, fills its
// writable part with fill, and publishes a used entry.
type fakeDevice struct {
	t         *testing.T
	q         *Queue
	lastAvail uint16
}

func (d *fakeDevice) desc(off int) (addr uint64, n uint32, flags, next uint16) {
	b := d.q.mem.Buf[off:]
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint16(b[12:]), binary.LittleEndian.Uint16(b[14:])
}

func (d *fakeDevice) use(fill []byte) (read []byte, segs int) {
	d.t.Helper()
	q, b := d.q, d.q.mem.Buf
	if binary.LittleEndian.Uint16(b[q.avail+2:]) == d.lastAvail {
		d.t.Fatal("device: nothing available")
	}
	head := binary.LittleEndian.Uint16(b[q.avail+4+2*int(d.lastAvail%q.cfg.Num):])
	d.lastAvail++
	table, idx := q.desc, head
	addr, n, flags, next := d.desc(table + 16*int(idx))
	if flags&linux.VRING_DESC_F_INDIRECT != 0 {
		table, idx = int(addr), 0
		addr, n, flags, next = d.desc(table)
	}
	written := 0
	for {
		segs++
		if flags&linux.VRING_DESC_F_WRITE != 0 {
			k := copy(b[addr:addr+uint64(n)], fill[written:])
			written += k
		} else {
			read = append(read, b[addr:addr+uint64(n)]...)
		}
		if flags&linux.VRING_DESC_F_NEXT == 0 {
			break
		}
		idx = next
		addr, n, flags, next = d.desc(table + 16*int(idx))
	}
	usedIdx := binary.LittleEndian.Uint16(b[q.used+2:])
	e := b[q.used+4+8*int(usedIdx%q.cfg.Num):]
	binary.LittleEndian.PutUint32(e, uint32(head))
	binary.LittleEndian.PutUint32(e[4:], uint32(written))
	binary.LittleEndian.PutUint16(b[q.used+2:], usedIdx+1)
	return read, segs
}

func newTestQueue(t *testing.T, cfg QueueConfig) (*Queue, *fakeDevice) {
	mem, err := NewMemory(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	q, err := NewQueue(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	if q.desc%16 != 0 || q.avail%4 != 0 || q.used%4 != 0 {
		t.Errorf("ring alignment: desc %#x avail %#x used %#x", q.desc, q.avail, q.used)
	}
	return q, &fakeDevice{t: t, q: q}
}

func TestQueueRoundTrip(t *testing.T) {
	q, dev := newTestQueue(t, QueueConfig{Num: 4, BufSize: 256})
	// More buffers than entries, so indexes wrap around the ring.
	for i := 0; i < 10; i++ {
		out := bytes.Repeat([]byte{byte(i)}, 10+i)
		if err := q.AddOut(out); err != nil {
			t.Fatal(err)
		}
		if got, _ := dev.use(nil); !bytes.Equal(got, out) {
			t.Fatalf("round %d: device read %x, want %x", i, got, out)
		}
		if _, err := q.Used(time.Second); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := q.AddIn(); err != nil {
			t.Fatal(err)
		}
		dev.use([]byte("filled by the device"))
		if el, err := q.Used(time.Second); err != nil || string(el.Data) != "filled by the device" {
			t.Fatalf("round %d: RX Used = %q, %v", i, el.Data, err)
		}
	}
	for i := 0; i < 4; i++ {
		if err := q.AddIn(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.AddIn(); err != ErrFull {
		t.Errorf("a fifth buffer in a 4-entry queue: %v", err)
	}
	if _, err := q.Used(50 * time.Millisecond); err == nil {
		t.Error("Used returned a buffer the device never used")
	}
}

func TestQueueChainsAndIndirect(t *testing.T) {
	for _, indirect := range []bool{false, true} {
		q, dev := newTestQueue(t, QueueConfig{Num: 8, BufSize: 100, Slots: 32, Indirect: indirect, MaxChain: 16})
		big := make([]byte, 1234) // 13 slots
		for i := range big {
			big[i] = byte(i * 3)
		}
		err := q.AddOut(big)
		if !indirect {
			// 13 descriptors do not fit an 8-entry ring without indirect.
			if err != ErrFull {
				t.Fatalf("direct 13-buffer chain in 8 entries: %v", err)
			}
			big = big[:700]
			if err := q.AddOut(big); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		got, segs := dev.use(nil)
		if !bytes.Equal(got, big) || segs != (len(big)+99)/100 {
			t.Fatalf("indirect=%v: device read %d bytes in %d segments, want %d bytes", indirect, len(got), segs, len(big))
		}
		q.Used(time.Second)
		// A writable chain of 300 bytes, filled with 250.
		if err := q.PushIn(300); err != nil {
			t.Fatal(err)
		}
		q.Kick1()
		fill := bytes.Repeat([]byte("x"), 250)
		dev.use(fill)
		if el, err := q.Used(time.Second); err != nil || !bytes.Equal(el.Data, fill) {
			t.Fatalf("indirect=%v: RX chain: %d bytes, %v", indirect, len(el.Data), err)
		}
		if q.Free() != 8 || len(q.freeSlot) != 32 {
			t.Errorf("indirect=%v: %d descriptors and %d slots free after all were used", indirect, len(q.freeDesc), len(q.freeSlot))
		}
	}
}

func TestEventIdxKickSuppression(t *testing.T) {
	q, _ := newTestQueue(t, QueueConfig{Num: 8, BufSize: 64, EventIdx: true})
	// avail_event = 0: the device wants a kick after entry 0 is made available.
	q.PushOut([]byte("a"))
	q.Kick1()
	// The device now says: kick me only after entry 5.
	binary.LittleEndian.PutUint16(q.mem.Buf[q.used+4+8*8:], 5)
	for i := 0; i < 4; i++ { // entries 1..4
		q.PushOut([]byte("b"))
		q.Kick1()
	}
	q.PushOut([]byte("c")) // entry 5
	q.PushOut([]byte("d")) // entry 6
	q.Kick1()
	if q.Kicks != 2 || q.KicksSuppressed != 4 {
		t.Errorf("kicks %d, suppressed %d; want 2 and 4", q.Kicks, q.KicksSuppressed)
	}
	if !needEvent(0, 1, 0) || needEvent(5, 5, 4) || !needEvent(5, 7, 5) || !needEvent(0xffff, 0, 0xffff) {
		t.Error("needEvent disagrees with vring_need_event")
	}
}

func TestNetHdr(t *testing.T) {
	h := NetHdr{Flags: 1, GSOType: 1, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16, NumBuffers: 3}
	b := h.Append(nil, 12)
	want := []byte{1, 1, 54, 0, 0xa8, 0x05, 34, 0, 16, 0, 3, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	if got, err := ParseNetHdr(b, 12); err != nil || got != h {
		t.Errorf("parsed %+v, %v", got, err)
	}
	if got, _ := ParseNetHdr(b, 10); got.NumBuffers != 0 || len(h.Append(nil, 10)) != 10 {
		t.Error("10-byte header carries num_buffers")
	}
	if _, err := ParseNetHdr(b[:5], 10); err == nil {
		t.Error("short header parsed")
	}
}

func TestPrefilledTX(t *testing.T) {
	q, dev := newTestQueue(t, QueueConfig{Num: 4, BufSize: 64})
	if err := q.PushOutInPlace(); err == nil {
		t.Error("PushOutInPlace before Prefill")
	}
	frame := []byte("a frame already in guest memory")
	if err := q.Prefill(frame); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := q.PushOutInPlace(); err != nil {
			t.Fatal(err)
		}
		q.Kick1()
		if got, _ := dev.use(nil); !bytes.Equal(got, frame) {
			t.Fatalf("round %d: device read %q", i, got)
		}
		q.Used(time.Second)
	}
}
