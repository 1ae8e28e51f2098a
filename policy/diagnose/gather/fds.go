package gather

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// procFD is one of QEMU's open files that can be a NIC backend.
type procFD struct {
	fd     int
	target string // readlink of /proc/PID/fd/N
	tun    bool   // a tun file: its fdinfo has tun's "iff:" line, whatever path it reads as
	iff    string // for a tun file: the interface (fdinfo "iff:"), "" when detached
	err    error  // why iff could not be read
}

// maxFdinfo bounds what netctl reads of a /proc/PID/fdinfo/N file: tun's
// has five short lines.
const maxFdinfo = 64 << 10

// readBounded reads at most max bytes of path; a longer file is an error.
func readBounded(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is over %d bytes", path, max)
	}
	return b, nil
}

// parseTunFdinfo returns the interface a tun file is attached to, from
// the "iff:" line tun adds to its fdinfo (drivers/net/tun.c
// tun_chr_show_fdinfo prints "iff:\t%s\n", empty when detached), and
// whether there is such a line: only tun's files have one, so it tells a
// tun file from any other whatever path the file reads as (a QEMU in a
// chroot or a container opened its own node, not /dev/net/tun). A
// detached file gives "", true. A name the kernel could not have printed
// (over 15 bytes, with '/', ':' or white space, "." or "..") or a second
// iff: line is an error.
func parseTunFdinfo(b []byte) (iff string, tun bool, err error) {
	seen := false
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "iff:")
		if !ok {
			continue
		}
		if seen {
			return "", false, fmt.Errorf("tun's fdinfo has two iff: lines")
		}
		seen = true
		iff = strings.TrimLeft(v, "\t ")
		if iff != "" && !validIfName(iff) {
			return "", false, fmt.Errorf("tun's fdinfo names %q, which is not an interface name (1 to 15 bytes, no '/', ':' or white space)", iff)
		}
	}
	return iff, seen, nil
}

// validIfName is the kernel's dev_valid_name (net/core/dev.c), and no NUL
// (ifr_name is a C string).
func validIfName(n string) bool {
	if n == "" || len(n) >= 16 || n == "." || n == ".." {
		return false
	}
	for _, r := range n {
		if r == '/' || r == ':' || r == 0 || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// backendFDs lists pid's tun, macvtap and vhost-vdpa file descriptors.
// A tun file is told by its fdinfo's "iff:" line, not by its path: from
// outside a chroot or a container, QEMU's tun reads as the node it opened
// there (/srv/vm/dev/net/tun, /dev/net/tun (deleted), ...). Only files
// that read as a path are looked at: sockets, pipes and anon inodes
// ("socket:[N]", "anon_inode:[eventfd]") are not tun files.
func backendFDs(pid int) ([]procFD, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read QEMU's file descriptors (run netctl diagnose as root, or as QEMU's user): %w", err)
	}
	var out []procFD
	for _, e := range es {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		p := procFD{fd: fd, target: target}
		switch {
		case macvtapIndex(target) > 0, isVhostVDPA(target):
		case strings.HasPrefix(target, "/"):
			info, err := readBounded(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd), maxFdinfo)
			if err != nil {
				if filepath.Base(strings.TrimSuffix(target, " (deleted)")) != "tun" {
					continue // a file gone since readlink, or unreadable: only a tun node matters
				}
				p.tun, p.err = true, err
				break
			}
			p.iff, p.tun, p.err = parseTunFdinfo(info)
			if !p.tun && p.err == nil {
				continue
			}
			p.tun = true
		default:
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// isVhostVDPA: target is a vhost-vdpa node (/dev/vhost-vdpa-N, or
// vhost-vdpa-N in another directory, as a QEMU in a chroot shows it).
func isVhostVDPA(target string) bool {
	return strings.HasPrefix(filepath.Base(target), "vhost-vdpa-")
}

// macvtapIndex is N for a macvtap node (/dev/tapN, or tapN in another
// directory, or a private tapN node already removed, as netctl's macvtap
// opens queues when /dev/tapN is not its own: "tapN (deleted)"), else 0.
// N is an interface index: decimal digits, 1 to 2^31-1.
func macvtapIndex(target string) int {
	digits, ok := strings.CutPrefix(strings.TrimSuffix(filepath.Base(target), " (deleted)"), "tap")
	if !ok || digits == "" || len(digits) > 10 || strings.TrimLeft(digits, "0123456789") != "" || digits[0] == '0' {
		return 0
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0
	}
	return int(n)
}

// maxPassedFDs bounds the fd numbers read from a netdev's fd=/fds=
// options: a tap has at most 256 queues (MAX_TAP_QUEUES).
const maxPassedFDs = 256

// passedFDs are the descriptor numbers libvirt passed QEMU for a tap
// (fd=N, or fds=N:M:... for queues), as info network shows them. Anything
// that is not a descriptor number is left out.
func passedFDs(opts map[string]string) []int {
	var out []int
	for _, v := range strings.FieldsFunc(opts["fd"]+":"+opts["fds"], func(r rune) bool { return r == ':' }) {
		if len(out) == maxPassedFDs {
			break
		}
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 && strings.TrimLeft(v, "0123456789") == "" {
			out = append(out, int(n))
		}
	}
	return out
}

// tunFlags duplicates QEMU's tap file descriptor (pidfd_getfd, Linux 5.6)
// and reads its flags and header size; it changes nothing.
func tunFlags(pid, fd int) (flags uint16, hdrLen int, err error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("pidfd_getfd of QEMU's fd %d (needs ptrace rights over QEMU: run as root): %w", fd, err)
	}
	defer unix.Close(dup)
	var ifr linux.Ifreq
	if err := linux.Ioctl(dup, linux.TUNGETIFF, unsafe.Pointer(&ifr)); err != nil {
		return 0, 0, err
	}
	n, err := linux.GetU32(dup, linux.TUNGETVNETHDRSZ)
	if err != nil {
		return 0, 0, err
	}
	return ifr.Flags, int(n), nil
}

// inNetns runs fn in the network namespace of process pid: the tap and
// the lower device are looked up where QEMU sees them (a VM in a pod or
// container has its own namespace). When that is the caller's namespace,
// fn runs in place.
func inNetns(pid int, fn func() error) error {
	var theirs, ours unix.Stat_t
	if pid == 0 || unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &theirs) != nil ||
		unix.Stat("/proc/thread-self/ns/net", &ours) != nil || theirs.Ino == ours.Ino {
		return fn()
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("QEMU's network namespace: %w", err)
	}
	defer ns.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter QEMU's network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}
