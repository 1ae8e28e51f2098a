// Package guest is a small userspace virtio-net driver: "the guest" side
// of a vhost-net device, for tests and netctl selftest. Guest memory is a
// memfd mapped shared (so it can also be handed to a VDUSE device); split
// virtqueues live in it, and buffer addresses in descriptors are
// guest-physical offsets into it (the memory table maps GPA 0 to its start).
package guest

import (
	"fmt"

	"github.com/netctl/netctl/internal/linux"
	"golang.org/x/sys/unix"
)

// Memory is guest memory: one memfd, mapped MAP_SHARED, GPA 0 at its start.
// Not safe for concurrent allocation.
type Memory struct {
	fd   int
	Buf  []byte
	next int // bump allocator
}

// NewMemory creates size bytes of guest memory. The Memory owns the memfd.
func NewMemory(size int) (*Memory, error) {
	fd, err := unix.MemfdCreate("netctl-guest", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("guest memory: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("guest memory: ftruncate %d: %w", size, err)
	}
	buf, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("guest memory: mmap: %w", err)
	}
	return &Memory{fd: fd, Buf: buf}, nil
}

// FD is the memfd, still owned by the Memory.
func (m *Memory) FD() int { return m.fd }

// Alloc reserves n bytes aligned to align and returns their offset (= GPA).
func (m *Memory) Alloc(n, align int) (int, error) {
	off := (m.next + align - 1) &^ (align - 1)
	if off+n > len(m.Buf) {
		return 0, fmt.Errorf("guest memory: out of memory (%d of %d bytes used, %d more wanted)", m.next, len(m.Buf), n)
	}
	m.next = off + n
	return off, nil
}

// VA is the process virtual address of guest offset off.
func (m *Memory) VA(off int) uint64 { return linux.MappedAddr(m.Buf, off) }

// Len is the size of the memory.
func (m *Memory) Len() int { return len(m.Buf) }

// SharedFileMapping marks Memory as a MAP_SHARED mapping of a file (its
// memfd), which vhost-vdpa devices need (see vdpa.SharedMemory).
func (m *Memory) SharedFileMapping() {}

// Close unmaps and closes the memory.
func (m *Memory) Close() error {
	if m.Buf == nil {
		return nil
	}
	err := unix.Munmap(m.Buf)
	m.Buf = nil
	if cerr := unix.Close(m.fd); err == nil {
		err = cerr
	}
	return err
}
