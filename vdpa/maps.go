package vdpa

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// mapsLine is one line of /proc/PID/maps:
// "start-end perms offset dev inode [path]".
type mapsLine struct {
	start, end uint64 // [start, end)
	perms      string // "rw-s"
	path       string // "" for anonymous memory; may hold spaces ("/memfd:guest (deleted)")
}

// shared reports a MAP_SHARED mapping.
func (l mapsLine) shared() bool { return len(l.perms) == 4 && l.perms[3] == 's' }

// parseMapsLine parses one line; ok is false for a line that is not in
// the kernel's format (any such line is an error to the caller).
func parseMapsLine(s string) (l mapsLine, ok bool) {
	// Five fields separated by single spaces, then padding and the path.
	f := strings.SplitN(s, " ", 6)
	if len(f) < 5 {
		return l, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return l, false
	}
	var err1, err2 error
	l.start, err1 = strconv.ParseUint(lo, 16, 64)
	l.end, err2 = strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || l.end < l.start || len(f[1]) != 4 {
		return mapsLine{}, false
	}
	l.perms = f[1]
	if len(f) == 6 {
		l.path = strings.TrimLeft(f[5], " ")
	}
	return l, true
}

// formatMapsLine is the inverse of parseMapsLine (offset, device and
// inode as zeros), for round-trip tests.
func formatMapsLine(l mapsLine) string {
	s := fmt.Sprintf("%x-%x %s 00000000 00:00 0", l.start, l.end, l.perms)
	if l.path != "" {
		s += "                          " + l.path
	}
	return s
}

// maxMapsLine bounds one line of /proc/self/maps (a path is at most
// PATH_MAX, plus the fixed fields and " (deleted)").
const maxMapsLine = 4096 + 128

// checkSharedFileMapping finds [addr, addr+size) in /proc/self/maps and
// requires every piece to be a shared mapping of a file.
func checkSharedFileMapping(addr, size uint64) error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	return checkSharedFileMappingIn(f, addr, size)
}

// checkSharedFileMappingIn is checkSharedFileMapping over maps text from
// r; addr+size must not wrap (checked by the caller).
func checkSharedFileMappingIn(r io.Reader, addr, size uint64) error {
	end := addr + size // [addr, end); end 0 means 2^64
	cur := addr
	done := func() bool { return end != 0 && cur >= end }
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), maxMapsLine)
	for !done() && s.Scan() {
		l, ok := parseMapsLine(s.Text())
		if !ok {
			return fmt.Errorf("/proc/self/maps: unexpected line %.80q", s.Text())
		}
		if l.end <= cur || l.start > cur {
			continue
		}
		if !l.shared() || !strings.HasPrefix(l.path, "/") {
			return fmt.Errorf("memory at %#x is not a shared mapping of a file (%s %s): this vhost-vdpa device's parent "+
				"maps by virtual address (VDUSE) and needs guest memory in a memfd, shm or hugetlbfs file mapped MAP_SHARED: %w",
				cur, l.perms, l.path, ErrInvalid)
		}
		cur = l.end
		if cur == 0 { // a mapping that ends at 2^64
			return nil
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("/proc/self/maps: %w", err)
	}
	if !done() {
		return fmt.Errorf("memory [%#x, +%#x) is not mapped (from %#x on): %w", addr, size, cur, ErrInvalid)
	}
	return nil
}
