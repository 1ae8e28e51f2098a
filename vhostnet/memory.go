package vhostnet

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// MaxMemRegionsPath is the vhost module parameter that limits the memory
// table (default 64; set with "modprobe vhost max_mem_regions=N").
const MaxMemRegionsPath = "/sys/module/vhost/parameters/max_mem_regions"

// MemoryRegion maps guest-physical addresses to the owner's memory.
type MemoryRegion struct {
	GuestPhysAddr uint64
	Size          uint64
	UserAddr      uint64 // virtual address in the owner process
}

// MaxMemRegions reads the vhost module's max_mem_regions.
func MaxMemRegions() (int, error) {
	b, err := os.ReadFile(MaxMemRegionsPath)
	if err != nil {
		return 0, fmt.Errorf("vhost-net: %w: is the vhost module loaded?", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("vhost-net: %s: %w", MaxMemRegionsPath, err)
	}
	return n, nil
}

// maxMemRegionsLimit is the largest max_mem_regions the vhost module can
// have (the parameter is a ushort).
const maxMemRegionsLimit = 65535

// maxMemRegions is the vhost module's max_mem_regions, or the largest it
// can be when that cannot be read (the kernel then checks). The parameter
// is read-only while the module is loaded (module_param 0444), so a value
// read once holds until the module is reloaded; if it is reloaded with a
// smaller limit, the kernel still refuses a table over it (E2BIG). The
// cache keeps a sysfs read out of every NewNIC and SetMemTable (under TCG
// that read cost more than the vhost ioctls it guards).
func maxMemRegions() int {
	mu := &maxMemRegionsCache
	mu.Lock()
	defer mu.Unlock()
	if mu.n == 0 {
		if n, err := MaxMemRegions(); err == nil && n > 0 && n <= maxMemRegionsLimit {
			mu.n = n
		} else {
			return maxMemRegionsLimit // not cached: the module may be loaded later
		}
	}
	return mu.n
}

// maxMemRegionsCache holds max_mem_regions once it was read.
var maxMemRegionsCache struct {
	sync.Mutex
	n int // guarded by the mutex; 0 until read
}

// validateMemTable checks what the kernel does not (it takes overlapping
// and wrapping regions silently, and the last one wins a lookup): every
// size > 0, neither the guest-physical nor the userspace range wraps past
// 2^64, guest-physical ranges do not overlap, at most max regions. The
// error wraps ErrInvalid and names the regions.
func validateMemTable(regions []MemoryRegion, max int) error {
	if len(regions) > max {
		return fmt.Errorf("vhost-net: %d memory regions, but the vhost module allows 0 to %d: %w: "+
			"merge regions, or reload vhost with 'modprobe vhost max_mem_regions=%d'", len(regions), max, ErrInvalid, len(regions))
	}
	for i, r := range regions {
		switch {
		case r.Size == 0:
			return fmt.Errorf("vhost-net: memory region %d has size 0: %w: give each region 1 byte or more", i, ErrInvalid)
		case r.GuestPhysAddr+(r.Size-1) < r.GuestPhysAddr:
			return fmt.Errorf("vhost-net: memory region %d: guest-physical %#x + size %#x wraps past 2^64: %w: "+
				"the last address must be at most 0xffffffffffffffff", i, r.GuestPhysAddr, r.Size, ErrInvalid)
		case r.UserAddr+(r.Size-1) < r.UserAddr:
			return fmt.Errorf("vhost-net: memory region %d: userspace address %#x + size %#x wraps past 2^64: %w: "+
				"the last address must be at most 0xffffffffffffffff", i, r.UserAddr, r.Size, ErrInvalid)
		}
	}
	// Sort indexes by guest-physical start; neighbours must not overlap.
	idx := make([]int, len(regions))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return regions[idx[a]].GuestPhysAddr < regions[idx[b]].GuestPhysAddr })
	for k := 1; k < len(idx); k++ {
		p, q := regions[idx[k-1]], regions[idx[k]]
		if last := p.GuestPhysAddr + (p.Size - 1); q.GuestPhysAddr <= last {
			return fmt.Errorf("vhost-net: memory regions %d [%#x, %#x] and %d [%#x, %#x] overlap in guest-physical space: %w: "+
				"each guest-physical address may belong to one region only", idx[k-1], p.GuestPhysAddr, last,
				idx[k], q.GuestPhysAddr, q.GuestPhysAddr+(q.Size-1), ErrInvalid)
		}
	}
	return nil
}

// SetMemTable replaces the memory table (VHOST_SET_MEM_TABLE). It first
// checks the table (validateMemTable: sizes, wrapping, overlaps, at most
// the vhost module's max_mem_regions) and refuses a bad one with
// ErrInvalid, leaving the old table in place. An empty table is allowed
// (vhost then translates nothing).
func (d *Device) SetMemTable(regions []MemoryRegion) error {
	if err := validateMemTable(regions, maxMemRegions()); err != nil {
		return err
	}
	hdr := unsafe.Sizeof(linux.VhostMemory{})
	rsz := unsafe.Sizeof(linux.VhostMemoryRegion{})
	buf := make([]uint64, (hdr+uintptr(len(regions))*rsz)/8)
	mem := (*linux.VhostMemory)(unsafe.Pointer(&buf[0]))
	mem.NRegions = uint32(len(regions))
	for i, r := range regions {
		p := (*linux.VhostMemoryRegion)(unsafe.Add(unsafe.Pointer(&buf[0]), hdr+uintptr(i)*rsz))
		*p = linux.VhostMemoryRegion{GuestPhysAddr: r.GuestPhysAddr, MemorySize: r.Size, UserspaceAddr: r.UserAddr}
	}
	err := d.ioctl(linux.VHOST_SET_MEM_TABLE, func(fd int) error {
		return linux.Ioctl(fd, linux.VHOST_SET_MEM_TABLE, unsafe.Pointer(&buf[0]))
	})
	if errors.Is(err, unix.E2BIG) {
		if max, merr := MaxMemRegions(); merr == nil {
			return fmt.Errorf("vhost-net: %d memory regions, but the vhost module allows %d: "+
				"merge regions, or reload vhost with 'modprobe vhost max_mem_regions=%d': %w", len(regions), max, len(regions), err)
		}
		return fmt.Errorf("%w: more regions than vhost's max_mem_regions", err)
	}
	return err
}

// SetLogBase sets the dirty log's address in the owner process
// (VHOST_SET_LOG_BASE): one bit per 4 KiB guest page, set by vhost when
// VHOST_F_LOG_ALL is negotiated.
func (d *Device) SetLogBase(addr uint64) error {
	return d.ioctl(linux.VHOST_SET_LOG_BASE, func(fd int) error {
		return linux.SetU64(fd, linux.VHOST_SET_LOG_BASE, addr)
	})
}

// SetLogFD sets an eventfd vhost signals after writing the log; -1 unbinds.
func (d *Device) SetLogFD(eventfd int) error {
	return d.ioctl(linux.VHOST_SET_LOG_FD, func(fd int) error {
		return linux.SetI32(fd, linux.VHOST_SET_LOG_FD, int32(eventfd))
	})
}
