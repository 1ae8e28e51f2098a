package qemuproc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Which QEMUs netctl trusts with what it hands out (a macvtap or tap
// queue, a vhost-net or vhost-vdpa fd) and reads (ring memory): a process
// whose argv[0] merely looks like qemu-system-* may be anyone's.
//
// A process is trusted when every uid it has (real, effective, saved,
// filesystem: /proc/PID/status) is root, netctl's own uid, one of the
// users libvirt runs QEMU as (DefaultQEMUUsers, when they exist on this
// host), or a user named in NETCTL_QEMU_USERS; and when its executable
// (/proc/PID/exe, the file the process runs even if its path was replaced
// since) is owned by root (or by netctl's own uid), and is writable by no
// one else (no write bit for others, nor for a group other than root's).
// An unprivileged user can start a process that passes the first rule
// only as themselves, and cannot make one pass the second: a program of
// theirs is not root's file.

// TrustedUsersEnv names more users (names or uids, comma-separated)
// whose QEMUs netctl trusts.
const TrustedUsersEnv = "NETCTL_QEMU_USERS"

// DefaultQEMUUsers are the users libvirt's system instance runs QEMU as
// (Debian and Ubuntu: libvirt-qemu; Fedora, RHEL, SUSE: qemu), trusted
// where they exist.
var DefaultQEMUUsers = []string{"libvirt-qemu", "qemu"}

// Trust is the set of uids whose QEMUs netctl trusts, each with the
// reason ("root", "libvirt-qemu", ...). The zero value trusts no one.
type Trust struct {
	UIDs map[uint32]string
}

// DefaultTrust is root, netctl's own uid, DefaultQEMUUsers that exist,
// and the users of NETCTL_QEMU_USERS (one that does not exist is an
// error: a typo must not leave a VM unreachable without a word).
func DefaultTrust() (Trust, error) {
	t := Trust{UIDs: map[uint32]string{0: "root"}}
	if u := uint32(os.Geteuid()); u != 0 {
		t.UIDs[u] = "netctl's own uid"
	}
	for _, n := range DefaultQEMUUsers {
		if u, err := user.Lookup(n); err == nil {
			if id, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
				t.UIDs[uint32(id)] = n
			}
		}
	}
	for _, n := range strings.Split(os.Getenv(TrustedUsersEnv), ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		id, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			u, lerr := user.Lookup(n)
			if lerr != nil {
				return Trust{}, fmt.Errorf("qemuproc: %s names user %.64q, who does not exist: name users that run QEMU (or uids): %w", TrustedUsersEnv, n, ErrInvalid)
			}
			id, _ = strconv.ParseUint(u.Uid, 10, 32)
		}
		t.UIDs[uint32(id)] = TrustedUsersEnv
	}
	return t, nil
}

// users lists the trusted uids for a message: "root (0), libvirt-qemu (64055)".
func (t Trust) users() string {
	ids := make([]int, 0, len(t.UIDs))
	for id := range t.UIDs {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprintf("%s (%d)", t.UIDs[uint32(id)], id))
	}
	return strings.Join(s, ", ")
}

// UntrustedError says why a process is not a QEMU netctl trusts; it
// wraps ErrConflict.
type UntrustedError struct {
	PID int
	Why string // "runs as uid 65534, ..."
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("qemuproc: pid %d %s", e.PID, e.Why)
}

func (e *UntrustedError) Unwrap() error { return ErrConflict }

// Check says why process pid is not a QEMU netctl trusts
// (*UntrustedError), or nil. start, when not 0, is the process's start
// time: a pid that is another process now is refused.
func (t Trust) Check(pid int, start uint64) error {
	why := t.why(pid, start)
	if why == "" {
		return nil
	}
	return &UntrustedError{PID: pid, Why: why}
}

func (t Trust) why(pid int, start uint64) string {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	uids, err := statusUIDs(filepath.Join(dir, "status"))
	if err != nil {
		return fmt.Sprintf("has uids netctl cannot read (%v)", err)
	}
	for _, u := range uids {
		if _, ok := t.UIDs[u]; !ok {
			return fmt.Sprintf("runs as uid %d, not a user netctl trusts with a QEMU (%s; name more in %s)", u, t.users(), TrustedUsersEnv)
		}
	}
	exe, _ := os.Readlink(filepath.Join(dir, "exe"))
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "exe"), &st); err != nil {
		return fmt.Sprintf("has an executable netctl cannot read (%v)", err)
	}
	self := uint32(os.Geteuid())
	switch {
	case st.Uid != 0 && st.Uid != self:
		return fmt.Sprintf("runs %s, which uid %d owns, not root", clip(exe), st.Uid)
	case st.Mode&0o002 != 0 || (st.Mode&0o020 != 0 && st.Gid != 0):
		return fmt.Sprintf("runs %s, which users other than root may write (mode %04o)", clip(exe), st.Mode&0o7777)
	}
	if start != 0 {
		if now, err := StartTime(pid); err != nil || now != start {
			return "is another process now"
		}
	}
	return ""
}

// statusUIDs reads the Uid: line of /proc/PID/status: real, effective,
// saved and filesystem uid.
func statusUIDs(p string) ([]uint32, error) {
	b, err := readBounded(p, 16<<10)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 {
			break
		}
		var out []uint32
		for _, s := range f {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("Uid line %q: %w", clip(sc.Text()), ErrInvalid)
			}
			out = append(out, uint32(v))
		}
		return out, nil
	}
	return nil, fmt.Errorf("no Uid line: %w", ErrInvalid)
}
