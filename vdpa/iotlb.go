package vdpa

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
)

// IOTLB messages: Map and Unmap write vhost_msg_v2 to the fd; inside
// Batch they are sent as one batch (one round trip to a VDUSE device).

// checkRange refuses a range that is empty or wraps past 2^64: the
// kernel's IOTLB keeps [start, last] with last = start+size-1.
func checkRange(what string, addr, size uint64) error {
	if size == 0 {
		return fmt.Errorf("%s range at %#x: size 0, want 1..%#x: %w", what, addr, uint64(math.MaxUint64)-addr+1, ErrInvalid)
	}
	if size-1 > math.MaxUint64-addr {
		return fmt.Errorf("%s range [%#x, +%#x) wraps past 2^64: size at most %#x at that address: %w",
			what, addr, size, math.MaxUint64-addr+1, ErrInvalid)
	}
	return nil
}

func checkPerm(perm uint8) error {
	switch perm {
	case linux.VHOST_ACCESS_RO, linux.VHOST_ACCESS_WO, linux.VHOST_ACCESS_RW:
		return nil
	}
	return fmt.Errorf("IOTLB permission %d: want VHOST_ACCESS_RO (1), WO (2) or RW (3): %w", perm, ErrInvalid)
}

func (d *VhostDevice) iotlb(typ uint8, iova, size, uaddr uint64, perm uint8) error {
	m := linux.VhostMsgV2{Type: linux.VHOST_IOTLB_MSG_V2,
		IOTLB: linux.VhostIOTLBMsg{IOVA: iova, Size: size, UAddr: uaddr, Perm: perm, Type: typ}}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&m)), unsafe.Sizeof(m))
	return d.wrapUse(d.use(func(fd int, _ vhost.Dev) error {
		n, err := unix.Write(fd, b)
		if err != nil {
			return fmt.Errorf("IOTLB message %d [%#x,+%#x): %w", typ, iova, size, err)
		}
		if n != len(b) {
			return fmt.Errorf("IOTLB message: short write %d", n)
		}
		return nil
	}))
}

// Map maps [iova, iova+size) to the process memory at uaddr. size must
// not be 0 and neither range may wrap past 2^64; perm is one of
// VHOST_ACCESS_RO, WO, RW. Otherwise the error wraps ErrInvalid.
//
// Where the device's parent maps by virtual address (MapVA: VDUSE, or
// MapUnknown), the memory must be a shared mapping of a file (memfd, shm,
// hugetlbfs): the kernel silently maps nothing for other memory, so Map
// checks /proc/self/maps and refuses it. A parent that pins pages (MapPA:
// hardware on pci or auxiliary) takes any memory, anonymous included.
func (d *VhostDevice) Map(iova, size, uaddr uint64, perm uint8) error {
	if err := d.checkMap(iova, size, uaddr, perm); err != nil {
		return d.wrap(err)
	}
	if d.MapMode() != MapPA {
		if err := checkSharedFileMapping(uaddr, size); err != nil {
			return d.wrap(err)
		}
	}
	return d.iotlb(linux.VHOST_IOTLB_UPDATE, iova, size, uaddr, perm)
}

func (d *VhostDevice) checkMap(iova, size, uaddr uint64, perm uint8) error {
	if err := checkRange("IOVA", iova, size); err != nil {
		return err
	}
	if err := checkRange("process memory", uaddr, size); err != nil {
		return err
	}
	return checkPerm(perm)
}

// SharedMemory is memory known to be a shared mapping of a file because
// the caller made it so (netctl's guest.Memory is a memfd mapped
// MAP_SHARED); MapMemory trusts it and skips Map's /proc/self/maps check.
type SharedMemory interface {
	VA(off int) uint64
	Len() int
	SharedFileMapping() // marker: the memory is MAP_SHARED over a file
}

// MapMemory maps all of m at iova (the same checks as Map, except the
// mapping check).
func (d *VhostDevice) MapMemory(iova uint64, m SharedMemory, perm uint8) error {
	if m.Len() <= 0 {
		return d.wrap(fmt.Errorf("memory of %d bytes: %w", m.Len(), ErrInvalid))
	}
	size, uaddr := uint64(m.Len()), m.VA(0)
	if err := d.checkMap(iova, size, uaddr, perm); err != nil {
		return d.wrap(err)
	}
	return d.iotlb(linux.VHOST_IOTLB_UPDATE, iova, size, uaddr, perm)
}

// Unmap removes the mapping of [iova, iova+size); size must not be 0 and
// the range must not wrap.
func (d *VhostDevice) Unmap(iova, size uint64) error {
	if err := checkRange("IOVA", iova, size); err != nil {
		return d.wrap(err)
	}
	return d.iotlb(linux.VHOST_IOTLB_INVALIDATE, iova, size, 0, 0)
}

// Batch runs f between BATCH_BEGIN and BATCH_END when the device took
// IOTLB_BATCH, so its Maps and Unmaps reach the device as one update.
func (d *VhostDevice) Batch(f func() error) error {
	batch := d.backendFeatures.Load()&(1<<linux.VHOST_BACKEND_F_IOTLB_BATCH) != 0
	if batch {
		if err := d.iotlb(linux.VHOST_IOTLB_BATCH_BEGIN, 0, 0, 0, 0); err != nil {
			return err
		}
	}
	err := f()
	if batch {
		if e := d.iotlb(linux.VHOST_IOTLB_BATCH_END, 0, 0, 0, 0); err == nil {
			err = e
		}
	}
	return err
}
