package vhostuser

import (
	"fmt"
	"sort"
)

// The checks on what a front-end asks for, made before any mapping or
// ioctl. All are pure; each error wraps ErrInvalid and says what is wrong.

// maxRingNum is the largest ring size (vhost's and virtio's split-ring
// limit); a size must also be a power of two.
const maxRingNum = 32768

func checkRingIndex(idx uint32, queues int) error {
	if idx >= uint32(2*queues) {
		return fmt.Errorf("ring %d: the bridge has %d queue pair(s), rings 0 to %d: %w", idx, queues, 2*queues-1, ErrInvalid)
	}
	return nil
}

func checkRingNum(idx, num uint32) error {
	if num == 0 || num > maxRingNum || num&(num-1) != 0 {
		return fmt.Errorf("ring %d: size %d: %w: use a power of two from 1 to %d", idx, num, ErrInvalid, maxRingNum)
	}
	return nil
}

func checkRingBase(idx, base uint32) error {
	if base > 0xffff {
		return fmt.Errorf("ring %d: base %d: %w: a split ring's index is 16 bits (0 to 65535)", idx, base, ErrInvalid)
	}
	return nil
}

// ringSizes are the bytes of a split ring's descriptor table, avail ring
// and used ring of num entries, with room for the event-index fields.
func ringSizes(num uint32) (desc, avail, used uint64) {
	n := uint64(num)
	return 16 * n, 6 + 2*n, 6 + 8*n
}

// checkRegions checks a memory table: 1 to max regions, each with a size,
// none whose guest-physical range, front-end range or file range wraps
// past 2^64, and none overlapping another in guest-physical or front-end
// address space (a translation must be unambiguous).
func checkRegions(regs []MemRegion, max int) error {
	if len(regs) == 0 {
		return fmt.Errorf("an empty memory table: %w: give at least one region", ErrInvalid)
	}
	if len(regs) > max {
		return fmt.Errorf("%d memory regions, the bridge takes at most %d (vhost's max_mem_regions): %w", len(regs), max, ErrInvalid)
	}
	for i, r := range regs {
		switch {
		case r.Size == 0:
			return fmt.Errorf("memory region %d (%v) has size 0: %w", i, r, ErrInvalid)
		case r.GuestPhysAddr+(r.Size-1) < r.GuestPhysAddr:
			return fmt.Errorf("memory region %d (%v): the guest-physical range wraps past 2^64: %w", i, r, ErrInvalid)
		case r.UserAddr+(r.Size-1) < r.UserAddr:
			return fmt.Errorf("memory region %d (%v): the front-end address range wraps past 2^64: %w", i, r, ErrInvalid)
		case r.MmapOffset+r.Size < r.MmapOffset || r.MmapOffset+r.Size > 1<<62:
			return fmt.Errorf("memory region %d (%v): the file range wraps or lies beyond 2^62: %w", i, r, ErrInvalid)
		}
	}
	for _, space := range []struct {
		name  string
		start func(MemRegion) uint64
	}{{"guest-physical", func(r MemRegion) uint64 { return r.GuestPhysAddr }}, {"front-end address", func(r MemRegion) uint64 { return r.UserAddr }}} {
		idx := make([]int, len(regs))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return space.start(regs[idx[a]]) < space.start(regs[idx[b]]) })
		for k := 1; k < len(idx); k++ {
			p, q := regs[idx[k-1]], regs[idx[k]]
			if space.start(q) <= space.start(p)+(p.Size-1) {
				return fmt.Errorf("memory regions %d (%v) and %d (%v) overlap in %s space: %w",
					idx[k-1], p, idx[k], q, space.name, ErrInvalid)
			}
		}
	}
	return nil
}

// inside reports whether [addr, addr+size) lies within one of the ranges
// [start(r), start(r)+r.Size), and returns that region's index.
func inside(regs []MemRegion, start func(MemRegion) uint64, addr, size uint64) (int, bool) {
	if size == 0 || addr+(size-1) < addr {
		return -1, false
	}
	for i, r := range regs {
		s := start(r)
		if addr >= s && addr-s <= r.Size-1 && size-1 <= r.Size-1-(addr-s) {
			return i, true
		}
	}
	return -1, false
}

func userAddr(r MemRegion) uint64  { return r.UserAddr }
func guestAddr(r MemRegion) uint64 { return r.GuestPhysAddr }

// checkRingAddr checks a ring's addresses against the memory table: the
// descriptor table, avail and used rings of num entries each lie inside a
// region (front-end addresses), aligned as virtio needs, and, when the
// used ring is logged, its guest-physical log address lies inside one.
func checkRingAddr(a VringAddr, num uint32, regs []MemRegion) error {
	desc, avail, used := ringSizes(num)
	if a.Desc%16 != 0 || a.Avail%2 != 0 || a.Used%4 != 0 {
		return fmt.Errorf("ring %d: misaligned (desc %#x 16-aligned, avail %#x 2-aligned, used %#x 4-aligned): %w",
			a.Index, a.Desc, a.Avail, a.Used, ErrInvalid)
	}
	for _, part := range []struct {
		name       string
		addr, size uint64
	}{{"descriptor table", a.Desc, desc}, {"avail ring", a.Avail, avail}, {"used ring", a.Used, used}} {
		if _, ok := inside(regs, userAddr, part.addr, part.size); !ok {
			return fmt.Errorf("ring %d: %s at %#x (%d bytes for %d entries) is not inside the front-end's memory: %w",
				a.Index, part.name, part.addr, part.size, num, ErrInvalid)
		}
	}
	if a.Flags&^VringAddrFlagLog != 0 {
		return fmt.Errorf("ring %d: address flags %#x: only bit 0 (log the used ring) exists: %w", a.Index, a.Flags, ErrInvalid)
	}
	if a.Flags&VringAddrFlagLog != 0 {
		if a.Log%4 != 0 {
			return fmt.Errorf("ring %d: used-ring log address %#x is not 4-aligned: %w", a.Index, a.Log, ErrInvalid)
		}
		if _, ok := inside(regs, guestAddr, a.Log, used); !ok {
			return fmt.Errorf("ring %d: used-ring log address %#x (guest-physical) is not inside guest memory: %w", a.Index, a.Log, ErrInvalid)
		}
	}
	return nil
}

// logPage is the guest memory one dirty-log bit stands for
// (VHOST_LOG_PAGE).
const logPage = 4096

// maxLogSize bounds a dirty log: 1 GiB of bits covers 32 TiB of guest
// memory.
const maxLogSize = 1 << 30

// logBytesFor is how many log bytes cover every region's guest-physical
// range (vhost writes bit gpa/4096, in 64-bit words).
func logBytesFor(regs []MemRegion) uint64 {
	var end uint64
	for _, r := range regs {
		if e := r.GuestPhysAddr + (r.Size - 1); e > end {
			end = e
		}
	}
	if len(regs) == 0 {
		return 0
	}
	pages := end/logPage + 1
	return (pages + 63) / 64 * 8
}

// checkLog checks a dirty log's size and offset, and that it covers the
// memory table (vhost would otherwise set bits past its end, in whatever
// this process has mapped there).
func checkLog(l Log, regs []MemRegion) error {
	switch {
	case l.MmapSize == 0 || l.MmapSize > maxLogSize:
		return fmt.Errorf("dirty log of %d bytes: %w: give 1 byte to %d", l.MmapSize, ErrInvalid, maxLogSize)
	case l.MmapOffset+l.MmapSize < l.MmapOffset || l.MmapOffset > 1<<62:
		return fmt.Errorf("dirty log: offset %#x + size %#x wraps or lies beyond 2^62: %w", l.MmapOffset, l.MmapSize, ErrInvalid)
	}
	if need := logBytesFor(regs); l.MmapSize < need {
		return fmt.Errorf("dirty log of %d bytes, the guest memory needs %d (one bit per 4 KiB page up to the highest "+
			"guest-physical address): %w", l.MmapSize, need, ErrInvalid)
	}
	return nil
}
