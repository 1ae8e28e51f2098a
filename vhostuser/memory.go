package vhostuser

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/vhostnet"
)

// fileMap is a shared mapping of part of a front-end's file (a guest
// memory region or the dirty log). It owns the mapping, not the fd.
type fileMap struct {
	data  []byte // the whole mapping, from a page-aligned file offset
	local uint64 // this process's address of the first byte asked for
}

// mapFile maps [offset, offset+size) of fd shared, read-write. The fd
// must be a regular file (a memfd, a tmpfs or hugetlbfs file) at least
// offset+size long: a shorter file would let a touch past its end SIGBUS
// this process, and the bridge checks rather than trusts. The caller
// keeps the fd; the mapping holds the file open on its own.
func mapFile(fd int, offset, size uint64, what string) (*fileMap, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: fstat: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: the fd is not a regular file (mode %#o): share guest memory as a memfd or a file "+
			"(QEMU: -object memory-backend-memfd,share=on): %w", what, st.Mode&unix.S_IFMT, ErrInvalid)
	}
	if offset+size < offset || offset+size > uint64(st.Size) {
		return nil, fmt.Errorf("%s: offset %#x + size %#x lies beyond the file's %#x bytes: %w", what, offset, size, st.Size, ErrInvalid)
	}
	align := uint64(os.Getpagesize())
	if b := uint64(st.Blksize); b > align && b&(b-1) == 0 && b <= 1<<30 {
		align = b // hugetlbfs: mappings start on a huge page
	}
	start := offset &^ (align - 1)
	length := size + (offset - start)
	// hugetlbfs maps whole huge pages and refuses to munmap a length
	// that ends inside one (EINVAL): map (and later unmap) whole ones.
	// The file's size is a multiple of them, so this stays inside it.
	length = (length + align - 1) &^ (align - 1)
	if length > 1<<46 || int64(start) < 0 {
		return nil, fmt.Errorf("%s: a mapping of %#x bytes at %#x: %w", what, length, start, ErrInvalid)
	}
	data, err := unix.Mmap(fd, int64(start), int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap %#x bytes at offset %#x: %w", what, length, start, err)
	}
	// The address goes to vhost-net as a number in its memory table; the
	// mapping is outside Go's heap and never moves.
	return &fileMap{data: data, local: linux.MappedAddr(data, 0) + (offset - start)}, nil
}

func (m *fileMap) unmap() error {
	if m == nil || m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}

// region is one mapped guest memory region.
type region struct {
	MemRegion
	m *fileMap
}

// regionList is the memory table as the bridge holds it.
type regionList []region

func (rs regionList) wire() []MemRegion {
	out := make([]MemRegion, len(rs))
	for i, r := range rs {
		out[i] = r.MemRegion
	}
	return out
}

// kernel is the table vhost-net gets: the same guest-physical ranges, at
// this process's addresses.
func (rs regionList) kernel() []vhostnet.MemoryRegion {
	out := make([]vhostnet.MemoryRegion, len(rs))
	for i, r := range rs {
		out[i] = vhostnet.MemoryRegion{GuestPhysAddr: r.GuestPhysAddr, Size: r.Size, UserAddr: r.m.local}
	}
	return out
}

// translate maps a front-end address to this process's address; false
// when no region holds it (callers check with checkRingAddr first).
func (rs regionList) translate(uaddr uint64) (uint64, bool) {
	for _, r := range rs {
		if uaddr >= r.UserAddr && uaddr-r.UserAddr < r.Size {
			return r.m.local + (uaddr - r.UserAddr), true
		}
	}
	return 0, false
}

func (rs regionList) unmapAll() {
	for _, r := range rs {
		r.m.unmap()
	}
}

// mapRegions maps each region's fd; on failure it unmaps what it mapped.
// It does not close the fds.
func mapRegions(regs []MemRegion, fds []int) (regionList, error) {
	out := make(regionList, 0, len(regs))
	for i, r := range regs {
		m, err := mapFile(fds[i], r.MmapOffset, r.Size, fmt.Sprintf("memory region %d (%v)", i, r))
		if err != nil {
			out.unmapAll()
			return nil, err
		}
		out = append(out, region{MemRegion: r, m: m})
	}
	return out, nil
}
