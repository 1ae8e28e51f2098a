package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

func unsafePointer(b []byte, off int) unsafe.Pointer { return unsafe.Pointer(&b[off]) }

// ErrFull is returned when a queue has no free descriptor or buffer.
var ErrFull = errors.New("virtqueue full")

// QueueConfig shapes a split virtqueue.
type QueueConfig struct {
	Num      uint16 // ring entries, a power of two (default 256)
	BufSize  int    // bytes per buffer slot (default 2048); larger data is chained
	Slots    int    // buffer slots (default Num)
	EventIdx bool   // VIRTIO_RING_F_EVENT_IDX: used_event/avail_event suppression
	Indirect bool   // VIRTIO_RING_F_INDIRECT_DESC: chains of more than one buffer go in an indirect table
	MaxChain int    // most buffers in one chain (default 64)
}

// Elem is one used buffer chain.
type Elem struct {
	Head uint16
	Len  uint32 // bytes the device wrote (RX) or 0/whatever it reports (TX)
	Data []byte // for writable chains, a copy of the first Len bytes
}

type inflight struct {
	descs []uint16 // direct descriptors of the chain, head first
	slots []int
	write bool
	busy  bool
}

// Queue is a split virtqueue driven from this process: descriptor table,
// avail and used rings and buffer slots all live in guest memory. Not safe
// for concurrent use.
type Queue struct {
	cfg                     QueueConfig
	mem                     *Memory
	desc, avail, used, bufs int // guest offsets
	indirect                int // Num tables of MaxChain descriptors
	Kick, Call              int // eventfds, owned by the Queue
	freeDesc                []uint16
	freeSlot                []int
	heads                   []inflight
	availIdx, kickedIdx     uint16
	lastUsed                uint16
	availFlags              uint16
	prefilled               int // frame length Prefill wrote into every slot

	// Counters.
	Kicks, KicksSuppressed, Interrupts uint64
}

// NewQueue lays out a queue in mem and creates its kick and call eventfds.
func NewQueue(mem *Memory, cfg QueueConfig) (*Queue, error) {
	if cfg.Num == 0 {
		cfg.Num = 256
	}
	if cfg.Num&(cfg.Num-1) != 0 {
		return nil, fmt.Errorf("guest queue: size %d is not a power of two", cfg.Num)
	}
	if cfg.BufSize == 0 {
		cfg.BufSize = 2048
	}
	if cfg.Slots == 0 {
		cfg.Slots = int(cfg.Num)
	}
	if cfg.MaxChain == 0 {
		cfg.MaxChain = 64
	}
	q := &Queue{cfg: cfg, mem: mem, Kick: -1, Call: -1, heads: make([]inflight, cfg.Num)}
	n := int(cfg.Num)
	var err error
	alloc := func(dst *int, size, align int) {
		if err == nil {
			*dst, err = mem.Alloc(size, align)
		}
	}
	alloc(&q.desc, 16*n, 16)
	// avail: flags, idx, ring[n], used_event, 2 spare bytes (32-bit atomics
	// on the tail must not touch other data).
	alloc(&q.avail, 4+2*n+4, 4)
	// used: flags, idx, ring[n] of {id, len}, avail_event, 2 spare bytes.
	alloc(&q.used, 4+8*n+4, 4)
	alloc(&q.bufs, cfg.BufSize*cfg.Slots, 64)
	if cfg.Indirect {
		alloc(&q.indirect, 16*cfg.MaxChain*n, 16)
	}
	if err != nil {
		return nil, err
	}
	if q.Kick, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("guest queue: eventfd: %w", err)
	}
	if q.Call, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(q.Kick)
		return nil, fmt.Errorf("guest queue: eventfd: %w", err)
	}
	for i := n - 1; i >= 0; i-- {
		q.freeDesc = append(q.freeDesc, uint16(i))
	}
	for i := cfg.Slots - 1; i >= 0; i-- {
		q.freeSlot = append(q.freeSlot, i)
	}
	q.setUsedEvent(0)
	return q, nil
}

// Num is the ring size.
func (q *Queue) Num() uint16 { return q.cfg.Num }

// BufSize is the size of one buffer slot.
func (q *Queue) BufSize() int { return q.cfg.BufSize }

// Addrs returns the ring addresses in this process (for SET_VRING_ADDR).
func (q *Queue) Addrs() (desc, avail, used uint64) {
	return q.mem.VA(q.desc), q.mem.VA(q.avail), q.mem.VA(q.used)
}

// UsedGPA is the guest-physical address of the used ring (for logging).
func (q *Queue) UsedGPA() uint64 { return uint64(q.used) }

// BufGPA is the guest-physical address of buffer slot i.
func (q *Queue) BufGPA(i int) uint64 { return uint64(q.bufs + i*q.cfg.BufSize) }

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

// Free reports how many more single-slot buffers fit.
func (q *Queue) Free() int { return min(len(q.freeDesc), len(q.freeSlot)) }

// Pending is the number of chains made available and not yet used.
func (q *Queue) Pending() int { return int(q.availIdx - q.lastUsed) }

func (q *Queue) putDesc(off int, addr uint64, n uint32, flags, next uint16) {
	d := q.mem.Buf[off:]
	binary.LittleEndian.PutUint64(d[0:], addr)
	binary.LittleEndian.PutUint32(d[8:], n)
	binary.LittleEndian.PutUint16(d[12:], flags)
	binary.LittleEndian.PutUint16(d[14:], next)
}

// push builds one chain: data split over slots (device-readable), or, when
// write, ceil(size/BufSize) empty device-writable slots. It publishes the
// chain in the avail ring without kicking.
func (q *Queue) push(data []byte, size int, write bool) (uint16, error) {
	if !write && data != nil {
		size = len(data)
	}
	nseg := max(1, (size+q.cfg.BufSize-1)/q.cfg.BufSize)
	if nseg > q.cfg.MaxChain {
		return 0, fmt.Errorf("guest queue: %d bytes need %d buffers of %d, more than a chain of %d", size, nseg, q.cfg.BufSize, q.cfg.MaxChain)
	}
	useIndirect := q.cfg.Indirect && nseg > 1
	ndesc := nseg
	if useIndirect {
		ndesc = 1
	}
	if len(q.freeDesc) < ndesc || len(q.freeSlot) < nseg {
		return 0, ErrFull
	}
	// Per-head bookkeeping reuses its slices: no allocation per buffer.
	head := q.freeDesc[len(q.freeDesc)-1]
	h := &q.heads[head]
	h.descs = append(h.descs[:0], q.freeDesc[len(q.freeDesc)-ndesc:]...)
	h.slots = append(h.slots[:0], q.freeSlot[len(q.freeSlot)-nseg:]...)
	h.write, h.busy = write, true
	q.freeSlot = q.freeSlot[:len(q.freeSlot)-nseg]
	q.freeDesc = q.freeDesc[:len(q.freeDesc)-ndesc]
	descs, slots := h.descs, h.slots
	// descs[0] must be the head: the free list pops from the end.
	descs[0], descs[len(descs)-1] = descs[len(descs)-1], descs[0]
	var flags uint16
	if write {
		flags = linux.VRING_DESC_F_WRITE
	}
	segOff, segNext := func(i int) int { return q.desc + 16*int(descs[i]) }, func(i int) uint16 { return descs[i+1] }
	if useIndirect {
		table := q.indirect + 16*q.cfg.MaxChain*int(head)
		segOff = func(i int) int { return table + 16*i }
		segNext = func(i int) uint16 { return uint16(i + 1) }
		q.putDesc(q.desc+16*int(head), uint64(table), uint32(16*nseg), linux.VRING_DESC_F_INDIRECT, 0)
	}
	left := size
	for i, s := range slots {
		boff := q.bufs + s*q.cfg.BufSize
		n := min(left, q.cfg.BufSize)
		if !write && data != nil {
			copy(q.mem.Buf[boff:boff+n], data[size-left:size-left+n])
		}
		left -= n
		f, next := flags, uint16(0)
		if i < nseg-1 {
			f |= linux.VRING_DESC_F_NEXT
			next = segNext(i)
		}
		q.putDesc(segOff(i), uint64(boff), uint32(n), f, next)
	}
	binary.LittleEndian.PutUint16(q.mem.Buf[q.avail+4+2*int(q.availIdx%q.cfg.Num):], head)
	q.availIdx++
	// {flags, idx} as one little-endian 32-bit word: the (sequentially
	// consistent) store orders the descriptor and ring writes before it.
	atomic.StoreUint32(q.word(q.avail), uint32(q.availIdx)<<16|uint32(q.availFlags))
	return head, nil
}

// Prefill copies data into every buffer slot, for PushOutInPlace: a sender
// whose frames are already in guest memory, as a real guest's are.
func (q *Queue) Prefill(data []byte) error {
	if len(data) > q.cfg.BufSize {
		return fmt.Errorf("guest queue: %d bytes do not fit a %d-byte slot", len(data), q.cfg.BufSize)
	}
	for s := 0; s < q.cfg.Slots; s++ {
		copy(q.mem.Buf[q.bufs+s*q.cfg.BufSize:], data)
	}
	q.prefilled = len(data)
	return nil
}

// PushOutInPlace makes the prefilled frame available again without
// copying it, and without kicking.
func (q *Queue) PushOutInPlace() error {
	if q.prefilled == 0 {
		return errors.New("guest queue: PushOutInPlace before Prefill")
	}
	_, err := q.push(nil, q.prefilled, false)
	return err
}

// PushOut makes data available to the device (TX) without kicking.
func (q *Queue) PushOut(data []byte) error { _, err := q.push(data, 0, false); return err }

// PushIn makes an empty buffer of size bytes available (RX) without kicking.
func (q *Queue) PushIn(size int) error { _, err := q.push(nil, size, true); return err }

// AddOut is PushOut then Kick.
func (q *Queue) AddOut(data []byte) error {
	if err := q.PushOut(data); err != nil {
		return err
	}
	return q.Kick1()
}

// AddIn is PushIn of one slot then Kick.
func (q *Queue) AddIn() error {
	if err := q.PushIn(q.cfg.BufSize); err != nil {
		return err
	}
	return q.Kick1()
}

// needEvent is vring_need_event from include/uapi/linux/virtio_ring.h.
func needEvent(event, newIdx, old uint16) bool { return newIdx-event-1 < newIdx-old }

// Kick1 notifies the device of what was pushed since the last kick, unless
// the device asked not to be notified (avail_event with EVENT_IDX, else
// VRING_USED_F_NO_NOTIFY).
func (q *Queue) Kick1() error {
	old := q.kickedIdx
	q.kickedIdx = q.availIdx
	if old == q.availIdx {
		return nil
	}
	if q.cfg.EventIdx {
		tail := atomic.LoadUint32(q.word(q.used + 4 + 8*int(q.cfg.Num)))
		if !needEvent(uint16(tail), q.availIdx, old) {
			q.KicksSuppressed++
			return nil
		}
	} else if atomic.LoadUint32(q.word(q.used))&linux.VRING_USED_F_NO_NOTIFY != 0 {
		q.KicksSuppressed++
		return nil
	}
	return q.writeKick()
}

// Notify kicks the device whatever the suppression state, for example after
// the device was stopped and started again.
func (q *Queue) Notify() error {
	q.kickedIdx = q.availIdx
	return q.writeKick()
}

func (q *Queue) writeKick() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // an eventfd counter is a host-order u64
	if _, err := unix.Write(q.Kick, one[:]); err != nil {
		return fmt.Errorf("guest queue: kick: %w", err)
	}
	q.Kicks++
	return nil
}

// KickFD and CallFD are the queue's eventfds, owned by the Queue.
func (q *Queue) KickFD() int { return q.Kick }
func (q *Queue) CallFD() int { return q.Call }

// setUsedEvent writes used_event (EVENT_IDX): the device interrupts once it
// has used the entry after this index.
func (q *Queue) setUsedEvent(v uint16) {
	off := q.avail + 4 + 2*int(q.cfg.Num)
	atomic.StoreUint32(q.word(off), uint32(v))
}

// SetUsedEvent asks for the next interrupt only after the device used
// entry v (EVENT_IDX only).
func (q *Queue) SetUsedEvent(v uint16) { q.setUsedEvent(v) }

// LastUsed is the used index the driver has consumed up to.
func (q *Queue) LastUsed() uint16 { return q.lastUsed }

// AvailIdx is the driver's avail index.
func (q *Queue) AvailIdx() uint16 { return q.availIdx }

// DeviceUsedIdx reads the device's used index.
func (q *Queue) DeviceUsedIdx() uint16 { return uint16(atomic.LoadUint32(q.word(q.used)) >> 16) }

// AvailEvent reads avail_event, the avail index after which the device
// wants a kick (EVENT_IDX).
func (q *Queue) AvailEvent() uint16 {
	return uint16(atomic.LoadUint32(q.word(q.used + 4 + 8*int(q.cfg.Num))))
}

// Poll returns the next used chain if the device has used one, with a copy
// of the bytes the device wrote.
func (q *Queue) Poll() (Elem, bool, error) { return q.poll(-1) }

// PollPrefix is Poll copying at most max bytes of what the device wrote
// (Len still says how much it wrote): for a receiver that only needs the
// virtio-net header, as a real guest hands the pages on without copying.
func (q *Queue) PollPrefix(max int) (Elem, bool, error) { return q.poll(max) }

func (q *Queue) poll(limit int) (Elem, bool, error) {
	if q.DeviceUsedIdx() == q.lastUsed {
		return Elem{}, false, nil
	}
	e := q.mem.Buf[q.used+4+8*int(q.lastUsed%q.cfg.Num):]
	id := binary.LittleEndian.Uint32(e[0:])
	n := binary.LittleEndian.Uint32(e[4:])
	q.lastUsed++
	if id >= uint32(q.cfg.Num) || !q.heads[id].busy {
		return Elem{}, false, fmt.Errorf("guest queue: device used descriptor %d, which is not a head in flight", id)
	}
	h := &q.heads[id]
	el := Elem{Head: uint16(id), Len: n}
	if h.write {
		if int(n) > len(h.slots)*q.cfg.BufSize {
			return Elem{}, false, fmt.Errorf("guest queue: device wrote %d bytes into a chain of %d", n, len(h.slots)*q.cfg.BufSize)
		}
		left := int(n)
		if limit >= 0 && left > limit {
			left = limit
		}
		if left > 0 {
			el.Data = make([]byte, 0, left)
		}
		for _, s := range h.slots {
			if left == 0 {
				break
			}
			k := min(left, q.cfg.BufSize)
			boff := q.bufs + s*q.cfg.BufSize
			el.Data = append(el.Data, q.mem.Buf[boff:boff+k]...)
			left -= k
		}
	}
	q.freeDesc = append(q.freeDesc, h.descs...)
	q.freeSlot = append(q.freeSlot, h.slots...)
	h.busy = false
	if q.cfg.EventIdx {
		q.setUsedEvent(q.lastUsed)
	}
	return el, true, nil
}

// Used waits up to timeout for the next used chain, sleeping on the call
// eventfd (counted in Interrupts).
func (q *Queue) Used(timeout time.Duration) (Elem, error) { return q.usedPrefix(timeout, -1) }

func (q *Queue) usedPrefix(timeout time.Duration, limit int) (Elem, error) {
	deadline := time.Now().Add(timeout)
	for {
		if el, ok, err := q.poll(limit); ok || err != nil {
			return el, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Elem{}, fmt.Errorf("guest queue: no used buffer within %s", timeout)
		}
		q.WaitInterrupt(min(left, 100*time.Millisecond))
	}
}

// WaitInterrupt sleeps until the call eventfd fires or d passes, and
// reports whether it fired.
func (q *Queue) WaitInterrupt(d time.Duration) bool {
	pfd := []unix.PollFd{{Fd: int32(q.Call), Events: unix.POLLIN}}
	unix.Poll(pfd, int(d/time.Millisecond))
	return q.TakeInterrupts() > 0
}

// TakeInterrupts reads and clears the call eventfd's counter.
func (q *Queue) TakeInterrupts() uint64 {
	var b [8]byte
	if n, err := unix.Read(q.Call, b[:]); err != nil || n != 8 {
		return 0
	}
	v := binary.NativeEndian.Uint64(b[:]) // an eventfd counter is a host-order u64
	q.Interrupts += v
	return v
}
