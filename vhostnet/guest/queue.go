package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePointer(b []byte, off int) unsafe.Pointer { return unsafe.Pointer(&b[off]) }

// Queue is a split virtqueue of Num entries driven from this process, with
// one fixed-size buffer per descriptor. Not safe for concurrent use.
type Queue struct {
	mem              *Memory
	Num              uint16
	desc, avail, use int // offsets of the three rings
	bufs             int // offset of Num buffers of BufSize bytes
	BufSize          int
	Kick, Call       int // eventfds, owned by the Queue
	availIdx         uint16
	lastUsed         uint16
	free             []uint16
}

// NewQueue lays out a ring of num entries and num buffers of bufSize bytes
// in mem, and creates its kick and call eventfds.
func NewQueue(mem *Memory, num uint16, bufSize int) (*Queue, error) {
	q := &Queue{mem: mem, Num: num, BufSize: bufSize, Kick: -1, Call: -1}
	var err error
	n := int(num)
	if q.desc, err = mem.Alloc(16*n, 16); err != nil {
		return nil, err
	}
	// avail: flags, idx, ring[n], used_event, plus 2 spare bytes so the
	// 32-bit atomics on the tail never touch other data.
	if q.avail, err = mem.Alloc(4+2*n+4, 4); err != nil {
		return nil, err
	}
	if q.use, err = mem.Alloc(4+8*n+4, 4); err != nil {
		return nil, err
	}
	if q.bufs, err = mem.Alloc(bufSize*n, 64); err != nil {
		return nil, err
	}
	if q.Kick, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, err
	}
	if q.Call, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(q.Kick)
		return nil, err
	}
	for i := n - 1; i >= 0; i-- {
		q.free = append(q.free, uint16(i))
	}
	return q, nil
}

// Addrs returns the ring addresses in this process (for SET_VRING_ADDR).
func (q *Queue) Addrs() (desc, avail, used uint64) {
	return q.mem.VA(q.desc), q.mem.VA(q.avail), q.mem.VA(q.use)
}

// Close closes the eventfds.
func (q *Queue) Close() {
	for _, fd := range []*int{&q.Kick, &q.Call} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

func (q *Queue) word(off int) *uint32 { return (*uint32)(unsafePointer(q.mem.Buf, off)) }

// add places one buffer holding data (device-readable) or, with write,
// an empty device-writable buffer of BufSize bytes, and publishes it.
func (q *Queue) add(data []byte, write bool) (uint16, error) {
	if len(q.free) == 0 {
		return 0, errors.New("virtqueue full")
	}
	if len(data) > q.BufSize {
		return 0, fmt.Errorf("buffer of %d bytes, queue buffers hold %d", len(data), q.BufSize)
	}
	id := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	boff := q.bufs + int(id)*q.BufSize
	d := q.mem.Buf[q.desc+16*int(id):]
	binary.LittleEndian.PutUint64(d[0:], uint64(boff)) // GPA
	var flags uint16
	n := len(data)
	if write {
		flags, n = 2, q.BufSize // VRING_DESC_F_WRITE
	} else {
		copy(q.mem.Buf[boff:], data)
	}
	binary.LittleEndian.PutUint32(d[8:], uint32(n))
	binary.LittleEndian.PutUint16(d[12:], flags)
	binary.LittleEndian.PutUint16(d[14:], 0)
	binary.LittleEndian.PutUint16(q.mem.Buf[q.avail+4+2*int(q.availIdx%q.Num):], id)
	q.availIdx++
	// {flags=0, idx} as one 32-bit little-endian word: the release store
	// orders the descriptor and ring writes before the new index.
	atomic.StoreUint32(q.word(q.avail), uint32(q.availIdx)<<16)
	return id, nil
}

// AddOut queues data for the device to read (TX) and kicks.
func (q *Queue) AddOut(data []byte) error {
	if _, err := q.add(data, false); err != nil {
		return err
	}
	return q.kick()
}

// AddIn queues an empty buffer for the device to fill (RX) and kicks.
func (q *Queue) AddIn() error {
	if _, err := q.add(nil, true); err != nil {
		return err
	}
	return q.kick()
}

func (q *Queue) kick() error {
	var one [8]byte
	one[0] = 1
	_, err := unix.Write(q.Kick, one[:])
	return err
}

// Used waits up to timeout for the device to use a buffer and returns a
// copy of its bytes (len as the device reported) and frees its descriptor.
func (q *Queue) Used(timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		usedIdx := uint16(atomic.LoadUint32(q.word(q.use)) >> 16)
		if usedIdx != q.lastUsed {
			e := q.mem.Buf[q.use+4+8*int(q.lastUsed%q.Num):]
			id := binary.LittleEndian.Uint32(e[0:])
			n := binary.LittleEndian.Uint32(e[4:])
			q.lastUsed++
			if id >= uint32(q.Num) || int(n) > q.BufSize {
				return nil, fmt.Errorf("device used descriptor %d with length %d", id, n)
			}
			boff := q.bufs + int(id)*q.BufSize
			out := append([]byte(nil), q.mem.Buf[boff:boff+int(n)]...)
			q.free = append(q.free, uint16(id))
			return out, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("no used buffer within %s", timeout)
		}
		// Sleep on the call eventfd (vhost signals it after using buffers).
		pfd := []unix.PollFd{{Fd: int32(q.Call), Events: unix.POLLIN}}
		ms := int(left / time.Millisecond)
		if ms > 100 {
			ms = 100
		}
		unix.Poll(pfd, ms)
		var b [8]byte
		unix.Read(q.Call, b[:])
	}
}
