package macvtap

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// queueSet is what taps and macvtaps share: one fd per queue, device-wide
// calls made on queue 0, and the offloads last set. Safe for concurrent
// use.
type queueSet struct {
	mu       sync.Mutex // guards fds, offloads
	kind     Kind
	name     string
	fds      []int // nil once closed
	offloads Offloads
}

// Name is the interface name.
func (q *queueSet) Name() string { return q.name }

// FD returns queue 0's fd, still owned by the backend.
func (q *queueSet) FD() int { return q.QueueFD(0) }

// QueueFD returns queue i's fd (-1 if there is none), still owned by the
// backend.
func (q *queueSet) QueueFD(i int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i < 0 || i >= len(q.fds) {
		return -1
	}
	return q.fds[i]
}

// Queues is the number of open queues.
func (q *queueSet) Queues() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fds)
}

// do runs f on queue 0's fd.
func (q *queueSet) do(req linux.Request, f func(fd int) error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.fds) == 0 {
		return fmt.Errorf("%s %s: %v: %w", q.kind, q.name, req, ErrClosed)
	}
	if err := f(q.fds[0]); err != nil {
		return fmt.Errorf("%s %s: %w", q.kind, q.name, err)
	}
	return nil
}

func (q *queueSet) setOffloadsRaw(o Offloads) error {
	return q.do(linux.TUNSETOFFLOAD, func(fd int) error {
		return linux.IoctlValue(fd, linux.TUNSETOFFLOAD, uintptr(o))
	})
}

// setOffloads sets o (TUNSETOFFLOAD) and records it.
func (q *queueSet) setOffloads(o Offloads) error {
	if err := q.setOffloadsRaw(o); err != nil {
		return offloadError(o, err)
	}
	q.mu.Lock()
	q.offloads = o
	q.mu.Unlock()
	return nil
}

// Offloads returns the offloads last set (the kernel has no call to read
// them back; ReadFeatures reads the resulting device features).
func (q *queueSet) Offloads() Offloads {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.offloads
}

// SetVnetHdrSize sets the header size on every queue (TUNSETVNETHDRSZ):
// 10, 12 or 20. If a queue refuses it, the queues already set get their
// old size back, so all queues keep one size.
func (q *queueSet) SetVnetHdrSize(n int) error {
	if err := checkHdrSize(q.kind, n, false); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.fds) == 0 {
		return fmt.Errorf("%s %s: header size: %w", q.kind, q.name, ErrClosed)
	}
	old := make([]int32, len(q.fds))
	for i, fd := range q.fds {
		v, err := linux.GetU32(fd, linux.TUNGETVNETHDRSZ)
		if err != nil {
			return fmt.Errorf("%s %s queue %d: read header size: %w", q.kind, q.name, i, err)
		}
		old[i] = int32(v)
	}
	for i, fd := range q.fds {
		if err := linux.SetI32(fd, linux.TUNSETVNETHDRSZ, int32(n)); err != nil {
			for j := 0; j < i; j++ {
				linux.SetI32(q.fds[j], linux.TUNSETVNETHDRSZ, old[j])
			}
			return fmt.Errorf("%s %s queue %d: header size %d: %w", q.kind, q.name, i, n, err)
		}
	}
	return nil
}

// VnetHdrSize reads queue 0's virtio-net header size back.
func (q *queueSet) VnetHdrSize() (int, error) {
	var v uint32
	err := q.do(linux.TUNGETVNETHDRSZ, func(fd int) (err error) {
		v, err = linux.GetU32(fd, linux.TUNGETVNETHDRSZ)
		return err
	})
	return int(int32(v)), err
}

// Flags reads queue 0's flags (TUNGETIFF): IFF_TAP, IFF_NO_PI,
// IFF_VNET_HDR, IFF_MULTI_QUEUE, IFF_PERSIST, ...
func (q *queueSet) Flags() (uint16, error) {
	var ifr linux.Ifreq
	err := q.do(linux.TUNGETIFF, func(fd int) error { return linux.Ioctl(fd, linux.TUNGETIFF, unsafe.Pointer(&ifr)) })
	return ifr.Flags, err
}

// Kind names the backend type.
func (q *queueSet) Kind() Kind { return q.kind }

// closeFDs closes every queue; calling it twice is not an error.
func (q *queueSet) closeFDs() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var first error
	for _, fd := range q.fds {
		if err := unix.Close(fd); err != nil && first == nil {
			first = err
		}
	}
	q.fds = nil
	return first
}

// minMTU is the smallest MTU tun and macvlan take (ETH_MIN_MTU); maxTapMTU
// is tun's largest for a tap (65535 less the 14-byte Ethernet header,
// tun.c MAX_MTU - hard_header_len).
const (
	minMTU    = 68
	maxTapMTU = 65535 - 14
)

// checkHdrSize validates a virtio-net header size: 10 (legacy), 12
// (VERSION_1 or MRG_RXBUF) or 20 (HASH_REPORT); zeroOK allows 0 for "keep".
func checkHdrSize(kind Kind, n int, zeroOK bool) error {
	switch n {
	case linux.VIRTIO_NET_HDR_LEN, linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN, linux.VIRTIO_NET_HDR_V1_HASH_LEN:
		return nil
	case 0:
		if zeroOK {
			return nil
		}
	}
	return fmt.Errorf("%s: virtio-net header size %d: use 10 (legacy), 12 (VERSION_1 or MRG_RXBUF) or 20 (hash report): %w", kind, n, ErrInvalid)
}

// checkConfig validates what taps and macvtaps share: the header size, the
// interface name and the queue count, which it returns (0 means 1). Every
// error wraps ErrInvalid and names the valid range.
func checkConfig(kind Kind, hdrSize int, name string, queues int) (int, error) {
	if err := checkHdrSize(kind, hdrSize, true); err != nil {
		return 0, err
	}
	if len(name) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("%s: name %q is longer than %d bytes: %w", kind, name, unix.IFNAMSIZ-1, ErrInvalid)
	}
	if queues == 0 {
		queues = 1
	}
	if queues < 1 || queues > linux.MAX_TAP_QUEUES {
		return 0, fmt.Errorf("%s: %d queues: a %s has 1 to %d (MAX_TAP_QUEUES): %w", kind, queues, kind, linux.MAX_TAP_QUEUES, ErrInvalid)
	}
	return queues, nil
}
