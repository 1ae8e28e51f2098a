package macvtap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Linux's dev_t: a 12-bit major and a 20-bit minor (include/linux/kdev_t.h
// MINORBITS), printed by sysfs's dev attribute as "%u:%u\n".
const (
	maxMajor = 1<<12 - 1
	maxMinor = 1<<20 - 1
	// maxDevFile bounds what parseDevNumber reads: "4095:1048575\n" is 13.
	maxDevFile = 32
)

// parseDevNumber reads a sysfs dev file ("MAJOR:MINOR\n", decimal, as the
// kernel prints it: no sign, no leading zeros, the newline optional). It
// refuses anything else, and numbers a dev_t cannot hold.
func parseDevNumber(b []byte) (maj, min uint32, err error) {
	if len(b) > maxDevFile {
		return 0, 0, fmt.Errorf("dev file of %d bytes: want MAJOR:MINOR", len(b))
	}
	s := string(b)
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	i := -1
	for j := 0; j < len(s); j++ {
		if s[j] == ':' {
			i = j
			break
		}
	}
	if i < 0 {
		return 0, 0, fmt.Errorf("dev file %q: want MAJOR:MINOR", b)
	}
	ma, err1 := parseDecimal(s[:i], maxMajor)
	mi, err2 := parseDecimal(s[i+1:], maxMinor)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("dev file %q: want MAJOR:MINOR (major 0..%d, minor 0..%d): %w", b, maxMajor, maxMinor, err)
	}
	return ma, mi, nil
}

// parseDecimal reads a canonical unsigned decimal no larger than max.
func parseDecimal(s string, max uint32) (uint32, error) {
	if s == "" || len(s) > 10 {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v > uint64(max) {
		return 0, fmt.Errorf("%s is larger than %d", s, max)
	}
	return uint32(v), nil
}

// formatDevNumber prints a device number as sysfs does.
func formatDevNumber(maj, min uint32) string {
	return strconv.FormatUint(uint64(maj), 10) + ":" + strconv.FormatUint(uint64(min), 10) + "\n"
}

// macvtapDevNumber reads the major:minor of macvtap name (ifindex) from
// the sysfs of the calling thread's network namespace.
func macvtapDevNumber(name string, ifindex int) (maj, min uint32, err error) {
	sys := filepath.Join("/sys/class/net", name, "macvtap", "tap"+strconv.Itoa(ifindex), "dev")
	f, err := os.Open(sys)
	if err != nil {
		return 0, 0, fmt.Errorf("macvtap %s: read %s: %w (is /sys mounted in this network namespace?)", name, sys, err)
	}
	defer f.Close()
	buf := make([]byte, maxDevFile+1)
	n, err := f.Read(buf)
	if err != nil {
		return 0, 0, fmt.Errorf("macvtap %s: read %s: %w", name, sys, err)
	}
	maj, min, err = parseDevNumber(buf[:n])
	if err != nil {
		return 0, 0, fmt.Errorf("macvtap %s: %s: %w", name, sys, err)
	}
	return maj, min, nil
}

// openTapQueues opens n queues of the macvtap character device maj:min
// (each open of the device is one queue) and returns their fds, which the
// caller owns. It opens devDir/tapN only when that is this very device,
// checked on the inode it then opens (O_PATH, fstat, reopen through
// /proc/self/fd), so a node that belongs to another namespace's macvtap is
// never opened, replaced or removed. Otherwise it makes a private node in
// a fresh directory (under os.TempDir(), else under devDir), opens it and
// removes node and directory again before returning. On failure every fd
// it opened is closed.
func openTapQueues(name string, ifindex int, devDir string, maj, min uint32, n int) ([]int, error) {
	if devDir == "" {
		devDir = "/dev"
	}
	tap := "tap" + strconv.Itoa(ifindex)
	node := filepath.Join(devDir, tap)
	want := unix.Mkdev(maj, min)
	conflict := ""
	pfd, err := unix.Open(node, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == want {
				fds, err := openN(fmt.Sprintf("/proc/self/fd/%d", pfd), n)
				unix.Close(pfd)
				if err == nil {
					return fds, nil
				}
				// No /proc (or it refuses): fall through to a private node.
			} else {
				unix.Close(pfd)
				conflict = fmt.Sprintf("%s is %s, not macvtap %s's %d:%d (a macvtap with ifindex %d in another network namespace?)",
					node, describeNode(&st), name, maj, min, ifindex)
			}
		} else {
			unix.Close(pfd)
		}
	}
	var why error
	bases := []string{os.TempDir(), devDir}
	if filepath.Clean(bases[0]) == filepath.Clean(bases[1]) {
		bases = bases[:1]
	}
	for _, base := range bases {
		fds, err := openPrivate(base, tap, want, n)
		if err == nil {
			return fds, nil
		}
		if why == nil {
			why = err
		} else {
			why = fmt.Errorf("%w; %w", why, err)
		}
	}
	if conflict != "" {
		return nil, fmt.Errorf("macvtap %s: %s; netctl leaves it as it is, and could not open the queues through a private node "+
			"(needs CAP_MKNOD and a directory on a filesystem without nodev): %w: %w", name, conflict, ErrConflict, why)
	}
	return nil, fmt.Errorf("macvtap %s: no usable %s, and a private node for %d:%d could not be made "+
		"(needs CAP_MKNOD and a directory on a filesystem without nodev): %w", name, node, maj, min, why)
}

// openPrivate makes dev as a character node in a fresh directory under
// base, opens it n times, and removes node and directory.
func openPrivate(base, tap string, dev uint64, n int) ([]int, error) {
	dir, err := os.MkdirTemp(base, "netctl-macvtap-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(dir)
	node := filepath.Join(dir, tap)
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(dev)); err != nil {
		return nil, fmt.Errorf("mknod %s: %w", node, err)
	}
	defer os.Remove(node)
	return openN(node, n)
}

// openN opens path n times read-write; on failure it closes what it opened.
func openN(path string, n int) ([]int, error) {
	fds := make([]int, 0, n)
	for q := 0; q < n; q++ {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("open %s (queue %d): %w", path, q, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func describeNode(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return fmt.Sprintf("character device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	case unix.S_IFBLK:
		return fmt.Sprintf("block device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "not a character device"
}
