package vdpa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Holder is a process with a device's vhost-vdpa node open.
type Holder struct {
	PID  int
	Comm string
	Path string // the path it opened the node by: /dev/vhost-vdpa-N, or a copy elsewhere
}

func (h Holder) String() string { return fmt.Sprintf("pid %d (%s)", h.PID, h.Comm) }

// UnreadableError says which processes Holders could not look into (their
// /proc/PID/fd was not readable: another user's process without
// CAP_SYS_PTRACE, or hidepid). The holders it did find are still
// returned. It unwraps to the first error.
type UnreadableError struct {
	PIDs []int
	Errs []error
}

func (e *UnreadableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "could not read the open files of %d process(es):", len(e.PIDs))
	for i, pid := range e.PIDs {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(e.PIDs)-i)
			break
		}
		fmt.Fprintf(&b, " pid %d (%v)", pid, e.Errs[i])
	}
	b.WriteString("; run as root to see every holder")
	return b.String()
}

func (e *UnreadableError) Unwrap() error { return e.Errs[0] }

// Holders lists the processes that have the device's vhost-vdpa node open,
// by whichever path: a node is matched by its device number (st_rdev), so
// a copy made with mknod in a container's /dev counts. The kernel does not
// delete a device while one is open: vdpa dev del waits, without a
// timeout, until every such fd is closed.
//
// A device not bound to vhost_vdpa has no holders. A process that exits
// during the scan is skipped; one whose fds cannot be read is reported in
// an *UnreadableError, returned with the holders found.
func Holders(name string) ([]Holder, error) {
	nodes, err := filepath.Glob(filepath.Join(SysfsDevices, name, "vhost-vdpa-*"))
	if err != nil {
		return nil, fmt.Errorf("vdpa: holders of %s: %w", name, err)
	}
	if len(nodes) == 0 {
		return nil, nil // not bound to vhost_vdpa: nothing to hold
	}
	b, err := os.ReadFile(filepath.Join(nodes[0], "dev"))
	if err != nil {
		return nil, fmt.Errorf("vdpa: holders of %s: %w", name, err)
	}
	rdev, err := parseDevNumber(b)
	if err != nil {
		return nil, fmt.Errorf("vdpa: holders of %s: %s: %w", name, filepath.Join(nodes[0], "dev"), err)
	}
	hs, err := holdersOf("/proc", rdev, os.ReadDir)
	if err != nil {
		return hs, fmt.Errorf("vdpa: holders of %s: %w", name, err)
	}
	return hs, nil
}

// gone reports errors that mean the process or fd went away meanwhile.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// holdersOf scans proc (/proc) for fds on the char device rdev.
func holdersOf(proc string, rdev uint64, readDir func(string) ([]os.DirEntry, error)) ([]Holder, error) {
	procs, err := readDir(proc)
	if err != nil {
		return nil, err
	}
	var hs []Holder
	var unreadable UnreadableError
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join(proc, p.Name(), "fd")
		fds, err := readDir(fdDir)
		if err != nil {
			if !gone(err) {
				unreadable.PIDs, unreadable.Errs = append(unreadable.PIDs, pid), append(unreadable.Errs, err)
			}
			continue
		}
		for _, fd := range fds {
			fdPath := filepath.Join(fdDir, fd.Name())
			// Sockets, pipes and anon inodes ("socket:[123]") are no
			// device node: skip them without a stat.
			if target, err := os.Readlink(fdPath); err == nil && !strings.HasPrefix(target, "/") {
				continue
			}
			var st unix.Stat_t
			if err := unix.Stat(fdPath, &st); err != nil {
				if !gone(err) {
					unreadable.PIDs, unreadable.Errs = append(unreadable.PIDs, pid), append(unreadable.Errs, fmt.Errorf("fd %s: %w", fd.Name(), err))
				}
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != rdev {
				continue
			}
			path, _ := os.Readlink(fdPath)
			comm, _ := os.ReadFile(filepath.Join(proc, p.Name(), "comm"))
			hs = append(hs, Holder{PID: pid, Comm: strings.TrimSpace(string(comm)), Path: path})
			break
		}
	}
	if len(unreadable.PIDs) > 0 {
		return hs, &unreadable
	}
	return hs, nil
}

// parseDevNumber parses a sysfs dev file ("MAJ:MIN\n").
func parseDevNumber(b []byte) (uint64, error) {
	s := strings.TrimSuffix(string(b), "\n")
	ma, mi, ok := strings.Cut(s, ":")
	if ok {
		maj, err1 := strconv.ParseUint(ma, 10, 32)
		min, err2 := strconv.ParseUint(mi, 10, 32)
		// Linux device numbers: 12-bit major, 20-bit minor.
		if err1 == nil && err2 == nil && maj < 1<<12 && min < 1<<20 {
			return unix.Mkdev(uint32(maj), uint32(min)), nil
		}
	}
	return 0, fmt.Errorf("device number %.40q, want MAJ:MIN (major < 4096, minor < 2^20): %w", s, ErrInvalid)
}
