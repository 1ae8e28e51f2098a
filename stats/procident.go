package stats

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/qemuproc"
)

// Before and after every process_vm_readv of another process, readU16s
// checks that the pid is still the QEMU netctl means to read: a process
// with a QEMU's argv[0] that netctl trusts (qemuproc.Trust: every uid
// trusted, its executable root's and writable by no one else), dumpable
// (not running a setuid or setgid program), and the same process image
// as the first time that pid (with that start time) was read: the same
// executable (device and inode of /proc/PID/exe), uids and gids. A pid
// that execs another program keeps its start time, so the start time
// alone cannot tell. A value read while any of this changed is
// discarded.
//
// The read itself runs with netctl's privilege. Doing it from a thread
// that dropped to the target's uid and gid would let the kernel refuse a
// non-dumpable target too, but on a host with Yama ptrace_scope 1 (the
// Ubuntu default) such a thread may not read a QEMU that is not its
// descendant at all (libvirt's never are), so netctl could not count
// them; and a value read across a change is never used (the check after
// the read discards it).

// procIdent is what identifies the process image behind a pid.
type procIdent struct {
	start          uint64
	exeDev, exeIno uint64
	uids, gids     [4]uint32
}

var (
	trustOnce sync.Once
	trust     qemuproc.Trust
	trustErr  error

	pinMu sync.Mutex
	// pinned: the identity each (pid, start time) had when it was first
	// read; guarded by pinMu, emptied when it reaches maxPinned.
	pinned = map[[2]uint64]procIdent{}
)

const maxPinned = 4096

// identify reads pid's identity from /proc.
func identify(pid int) (procIdent, error) {
	var id procIdent
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	st, err := qemuproc.StartTime(pid)
	if err != nil {
		return id, err
	}
	id.start = st
	var est unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "exe"), &est); err != nil {
		return id, fmt.Errorf("pid %d: its executable: %w", pid, err)
	}
	id.exeDev, id.exeIno = est.Dev, est.Ino
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return id, fmt.Errorf("pid %d: %w", pid, err)
	}
	if id.uids, err = statusIDs(b, "Uid:"); err != nil {
		return id, fmt.Errorf("pid %d: %w", pid, err)
	}
	if id.gids, err = statusIDs(b, "Gid:"); err != nil {
		return id, fmt.Errorf("pid %d: %w", pid, err)
	}
	return id, nil
}

// statusIDs reads the four ids of a Uid: or Gid: line of /proc/PID/status.
func statusIDs(status []byte, key string) ([4]uint32, error) {
	var out [4]uint32
	for _, l := range bytes.Split(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(l, []byte(key))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 4 {
			break
		}
		for i, s := range f {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return out, fmt.Errorf("/proc status %s %q: %w", key, s, ErrInvalid)
			}
			out[i] = uint32(v)
		}
		return out, nil
	}
	return out, fmt.Errorf("/proc status has no %s line: %w", key, ErrInvalid)
}

// checkReadable says whether pid may be read now, and its identity.
func checkReadable(pid int) (procIdent, error) {
	refuse := func(why string, a ...any) (procIdent, error) {
		return procIdent{}, fmt.Errorf("not reading the memory of pid %d: %s: %w", pid, fmt.Sprintf(why, a...), ErrNotAvailable)
	}
	id, err := identify(pid)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			// /proc/PID/exe needs the same ptrace access as the read
			// (a root without CAP_SYS_PTRACE, a security module): say
			// what refused and what to do, as for the read itself.
			return procIdent{}, permErr(pid, unix.EPERM, readPtraceEnv())
		}
		return refuse("%v", err)
	}
	trustOnce.Do(func() { trust, trustErr = qemuproc.DefaultTrust() })
	if trustErr != nil {
		return refuse("%v", trustErr)
	}
	if err := trust.Check(pid, id.start); err != nil {
		return refuse("%v", err)
	}
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if argv, _ := qemuproc.SplitCmdline(raw); err != nil || len(argv) == 0 || !qemuproc.IsQEMU(argv[0]) {
		return refuse("it is not a QEMU (its program is not qemu-system-* or qemu-kvm)")
	}
	// A set-id program has real ids other than its effective ones (a
	// QEMU, run by root, by libvirt or dropping privileges with
	// -run-with user=, has all four the same). An effective uid of root
	// owns /proc/PID whether the process is dumpable or not, so this is
	// what tells a setuid-root program run by a trusted user.
	if !sameIDs(id.uids) || !sameIDs(id.gids) {
		return refuse("it runs a setuid or setgid program (uids %v, gids %v)", id.uids, id.gids)
	}
	// A non-dumpable process (one that exec'd a setuid or setgid
	// program, or asked not to be read) has the files of /proc/PID
	// owned by root:root whatever its ids. Not the directory itself:
	// the kernel owns that by the effective ids always (task_dump_owner).
	// (A process whose ids are all root's cannot be told this way.)
	var dst unix.Stat_t
	if err := unix.Stat(filepath.Join("/proc", strconv.Itoa(pid), "stat"), &dst); err != nil {
		return refuse("%v", err)
	}
	if dst.Uid != id.uids[1] || dst.Gid != id.gids[1] {
		return refuse("it is not dumpable (it runs a setuid or setgid program, or asked not to be read; a QEMU that changed its user itself, with -runas or -run-with user=, is not dumpable either: start it as its user, as libvirt does)")
	}
	key := [2]uint64{uint64(pid), id.start}
	pinMu.Lock()
	defer pinMu.Unlock()
	first, ok := pinned[key]
	if !ok {
		if len(pinned) >= maxPinned {
			clear(pinned)
		}
		pinned[key] = id
		return id, nil
	}
	if first != id {
		return refuse("it is no longer the process first read under that pid (it exec'd another program, or changed its uids or gids)")
	}
	return id, nil
}

// sameIDs says a process's real, effective, saved and filesystem ids are
// one id.
func sameIDs(ids [4]uint32) bool {
	return ids[0] == ids[1] && ids[1] == ids[2] && ids[2] == ids[3]
}
