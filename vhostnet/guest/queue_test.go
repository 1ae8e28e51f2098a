package guest

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// device plays the device side of q in-process: it takes the next avail
// entry, optionally fills a writable buffer, and publishes a used entry.
func device(t *testing.T, q *Queue, fill []byte) (id uint16, data []byte) {
	t.Helper()
	b := q.mem.Buf
	availIdx := binary.LittleEndian.Uint16(b[q.avail+2:])
	usedIdx := binary.LittleEndian.Uint16(b[q.use+2:])
	if availIdx == usedIdx {
		t.Fatal("device: nothing available")
	}
	id = binary.LittleEndian.Uint16(b[q.avail+4+2*int(usedIdx%q.Num):])
	d := b[q.desc+16*int(id):]
	addr, n, flags := binary.LittleEndian.Uint64(d), binary.LittleEndian.Uint32(d[8:]), binary.LittleEndian.Uint16(d[12:])
	if flags&2 != 0 {
		copy(b[addr:addr+uint64(n)], fill)
		n = uint32(len(fill))
	} else {
		data = append([]byte(nil), b[addr:addr+uint64(n)]...)
	}
	e := b[q.use+4+8*int(usedIdx%q.Num):]
	binary.LittleEndian.PutUint32(e, uint32(id))
	binary.LittleEndian.PutUint32(e[4:], n)
	binary.LittleEndian.PutUint16(b[q.use+2:], usedIdx+1)
	return id, data
}

func TestQueueRoundTrip(t *testing.T) {
	mem, err := NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	q, err := NewQueue(mem, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.desc%16 != 0 || q.avail%4 != 0 || q.use%4 != 0 {
		t.Errorf("ring alignment: desc %#x avail %#x used %#x", q.desc, q.avail, q.use)
	}
	// More buffers than entries, so indexes wrap around the ring.
	for i := 0; i < 10; i++ {
		out := bytes.Repeat([]byte{byte(i)}, 10+i)
		if err := q.AddOut(out); err != nil {
			t.Fatal(err)
		}
		if _, got := device(t, q, nil); !bytes.Equal(got, out) {
			t.Fatalf("round %d: device read %x, want %x", i, got, out)
		}
		if used, err := q.Used(time.Second); err != nil || !bytes.Equal(used, out) {
			t.Fatalf("round %d: Used = %x, %v", i, used, err)
		}
		if err := q.AddIn(); err != nil {
			t.Fatal(err)
		}
		device(t, q, []byte("filled by the device"))
		if used, err := q.Used(time.Second); err != nil || string(used) != "filled by the device" {
			t.Fatalf("round %d: RX Used = %q, %v", i, used, err)
		}
	}
	for i := 0; i < 4; i++ {
		if err := q.AddIn(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.AddIn(); err == nil {
		t.Error("a fifth buffer fit in a 4-entry queue")
	}
	if _, err := q.Used(50 * time.Millisecond); err == nil {
		t.Error("Used returned a buffer the device never used")
	}
	if err := q.AddOut(make([]byte, 257)); err == nil {
		t.Error("a 257-byte buffer fit in 256-byte slots")
	}
}
