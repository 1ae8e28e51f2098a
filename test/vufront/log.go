package vufront

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dirtyLog is the dirty-page log shared with the backend (LOG_SHMFD): a
// memfd, one bit per 4 KiB page of guest-physical memory, mapped here to
// read. It owns the memfd and the mapping.
type dirtyLog struct {
	fd  int
	buf []byte
}

// logPage is the page size of the dirty log (VHOST_LOG_PAGE).
const logPage = 4096

func newDirtyLog(memSize int) (*dirtyLog, error) {
	pages := (memSize + logPage - 1) / logPage
	size := ((pages+7)/8 + 4095) &^ 4095
	fd, err := unix.MemfdCreate("vufront-log", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("vufront: dirty log: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vufront: dirty log: ftruncate %d: %w", size, err)
	}
	buf, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vufront: dirty log: mmap: %w", err)
	}
	return &dirtyLog{fd: fd, buf: buf}, nil
}

func (l *dirtyLog) close() {
	unix.Munmap(l.buf)
	unix.Close(l.fd)
}

// Dirty reports whether the backend marked the page holding gpa dirty.
func (f *Frontend) Dirty(gpa uint64) bool {
	if f.log == nil {
		return false
	}
	p := gpa / logPage
	if p/8 >= uint64(len(f.log.buf)) {
		return false
	}
	return f.log.buf[p/8]&(1<<(p%8)) != 0
}

// DirtyPages counts the pages marked dirty in the log.
func (f *Frontend) DirtyPages() int {
	if f.log == nil {
		return 0
	}
	n := 0
	for _, b := range f.log.buf {
		for ; b != 0; b &= b - 1 {
			n++
		}
	}
	return n
}

// ClearLog clears every bit of the log.
func (f *Frontend) ClearLog() {
	if f.log != nil {
		clear(f.log.buf)
	}
}
