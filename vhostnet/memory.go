package vhostnet

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// SetMemTable replaces the memory table (VHOST_SET_MEM_TABLE). More regions
// than the vhost module allows is an error that says how to raise it.
func (d *Device) SetMemTable(regions []MemoryRegion) error {
	for i, r := range regions {
		if r.Size == 0 {
			return fmt.Errorf("vhost-net: memory region %d has size 0", i)
		}
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
