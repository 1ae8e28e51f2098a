package vhostuser

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DropPrivileges makes this process run as uid:gid with no supplementary
// groups and no capabilities, for good: call it after NewBridge, which
// opened every device the bridge will use (the vhost-net fds are kept and
// reset between front-ends, so no later open needs privilege). In order:
//
//   - PR_SET_NO_NEW_PRIVS (no execve can grant privilege again) and every
//     capability dropped from the bounding set, on every thread
//     (syscall.AllThreadsSyscall; in a cgo binary, where Go cannot do that,
//     on the calling thread only, which the report says);
//   - setgroups([]), setresgid(gid), setresuid(uid): Go's syscall package
//     applies these to every thread (since Go 1.16), and a uid change away
//     from 0 clears the permitted, effective and ambient capabilities;
//   - PR_SET_DUMPABLE 0 (whatever fs.suid_dumpable says), so that the
//     owner's other processes (the VMM) cannot ptrace this one;
//   - a check of every thread in /proc/self/task: real, effective, saved
//     and filesystem ids are uid and gid, and no capability is left.
//
// It returns what it did, in words, for the log. Like `setpriv
// --reuid=UID --regid=GID --clear-groups --inh-caps=-all --bounding-set=-all
// --no-new-privs`.
func DropPrivileges(uid, gid int) (string, error) {
	if uid <= 0 || gid <= 0 {
		return "", fmt.Errorf("drop privileges to %d:%d: %w: give a user and group other than root", uid, gid, ErrInvalid)
	}
	note := "no_new_privs and an empty bounding set on every thread"
	allThreads := true
	if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); errno != 0 {
		if errno != syscall.ENOTSUP {
			return "", fmt.Errorf("drop privileges: PR_SET_NO_NEW_PRIVS: %w", errno)
		}
		allThreads = false // a cgo binary
		note = "no_new_privs and an empty bounding set on the calling thread only (a cgo build cannot change every thread)"
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return "", fmt.Errorf("drop privileges: PR_SET_NO_NEW_PRIVS: %w", err)
		}
	}
	last, err := lastCap()
	if err != nil {
		return "", err
	}
	for c := 0; c <= last; c++ {
		var err error
		if allThreads {
			if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); errno != 0 {
				err = errno
			}
		} else {
			err = unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return "", fmt.Errorf("drop privileges: drop capability %d from the bounding set: %w (needs CAP_SETPCAP: run as root)", c, err)
		}
	}
	if err := syscall.Setgroups(nil); err != nil {
		return "", fmt.Errorf("drop privileges: setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return "", fmt.Errorf("drop privileges: setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return "", fmt.Errorf("drop privileges: setresuid %d: %w", uid, err)
	}
	// The kernel makes the process dumpable again after a uid change when
	// fs.suid_dumpable is 1; the front-end's VMM runs as the same user and
	// must not ptrace the bridge or open its fds through /proc/PID/fd.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return "", fmt.Errorf("drop privileges: PR_SET_DUMPABLE: %w", err)
	}
	if err := checkDropped(uid, gid, allThreads); err != nil {
		return "", err
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		return "", fmt.Errorf("drop privileges: the process is still dumpable (%d, %v) after PR_SET_DUMPABLE 0", d, err)
	}
	return fmt.Sprintf("running as %d:%d with no groups and no capabilities, not dumpable; %s", uid, gid, note), nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("drop privileges: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("drop privileges: cap_last_cap %q: %w", b, ErrInvalid)
	}
	return n, nil
}

// checkDropped reads every thread's status and checks its ids and
// capabilities.
func checkDropped(uid, gid int, bounding bool) error {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("drop privileges: list threads: %v", err)
	}
	for _, path := range tasks {
		st, err := readStatus(path)
		if err != nil {
			continue // a thread that exited
		}
		ids := fmt.Sprintf("%d\t%d\t%d\t%d", uid, uid, uid, uid)
		gids := fmt.Sprintf("%d\t%d\t%d\t%d", gid, gid, gid, gid)
		if st["Uid"] != ids || st["Gid"] != gids || st["Groups"] != "" {
			return fmt.Errorf("drop privileges: %s: Uid %q Gid %q Groups %q after the drop", path, st["Uid"], st["Gid"], st["Groups"])
		}
		keys := []string{"CapPrm", "CapEff", "CapAmb", "CapInh"}
		if bounding {
			keys = append(keys, "CapBnd", "NoNewPrivs")
		}
		for _, k := range keys {
			want := "0000000000000000"
			if k == "NoNewPrivs" {
				want = "1"
			}
			if st[k] != want {
				return fmt.Errorf("drop privileges: %s: %s is %q after the drop, want %s", path, k, st[k], want)
			}
		}
	}
	return nil
}

func readStatus(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st, sc.Err()
}
