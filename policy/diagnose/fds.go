package diagnose

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// procFD is one of QEMU's open files that can be a NIC backend.
type procFD struct {
	fd     int
	target string // readlink of /proc/PID/fd/N
	iff    string // for /dev/net/tun: the interface (fdinfo "iff:")
}

// backendFDs lists pid's tun, macvtap and vhost-vdpa file descriptors.
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
		case target == "/dev/net/tun":
			info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
			for _, l := range strings.Split(string(info), "\n") {
				if v, ok := strings.CutPrefix(l, "iff:"); ok {
					p.iff = strings.TrimSpace(v)
				}
			}
		case macvtapIndex(target) > 0, strings.HasPrefix(target, "/dev/vhost-vdpa-"):
		default:
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// macvtapIndex is N for a macvtap node (/dev/tapN, or tapN in another
// directory, or a private tapN node already removed, as netctl's macvtap
// opens queues when /dev/tapN is not its own: "tapN (deleted)"), else 0.
func macvtapIndex(target string) int {
	base := strings.TrimSuffix(filepath.Base(target), " (deleted)")
	n, err := strconv.Atoi(strings.TrimPrefix(base, "tap"))
	if !strings.HasPrefix(base, "tap") || err != nil || n <= 0 {
		return 0
	}
	return n
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
