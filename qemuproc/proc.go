package qemuproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// VM is a running QEMU found in /proc.
type VM struct {
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/PID/stat (clock ticks after boot):
	// with PID it names the process even after the PID is reused.
	StartTime uint64    `json:"starttime"`
	Name      string    `json:"name"`           // -name; "" when QEMU has none
	UUID      string    `json:"uuid,omitempty"` // -uuid, lower case; "" when QEMU has none
	Binary    string    `json:"binary"`
	Monitors  []Monitor `json:"monitors"`
	Truncated bool      `json:"truncated,omitempty"` // the command line was cut at MaxCmdline
}

// procRoot is where List reads processes; tests of the /proc walk point
// it at a copy.
var procRoot = "/proc"

// List returns every QEMU system emulator running on this host (in this
// PID namespace), sorted by PID, with each monitor's Socket set to where
// netctl reaches it. A process that exits while it is read is left out.
// Without root, another user's QEMU is listed, but a socket reached
// through its /proc/PID/root or cwd cannot be dialed.
func List() ([]VM, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("qemuproc: read %s: %w", procRoot, err)
	}
	var vms []VM
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		vm, ok := readVM(pid)
		if ok {
			vms = append(vms, vm)
		}
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].PID < vms[j].PID })
	return vms, nil
}

// readVM reads one process; ok is false when it is not QEMU or is gone.
func readVM(pid int) (VM, bool) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	raw, err := readBounded(filepath.Join(dir, "cmdline"), MaxCmdline+1)
	if err != nil {
		return VM{}, false
	}
	argv, cut := SplitCmdline(raw)
	c, err := ParseCmdline(argv)
	if err != nil {
		return VM{}, false
	}
	st, err := StartTime(pid)
	if err != nil {
		return VM{}, false
	}
	vm := VM{PID: pid, StartTime: st, Name: c.Name, UUID: c.UUID, Binary: c.Binary, Monitors: c.Monitors, Truncated: cut || c.Truncated}
	for i := range vm.Monitors {
		resolveSocket(pid, c, &vm.Monitors[i])
	}
	return vm, true
}

// resolveSocket sets m.Socket: the path QEMU bound, seen from netctl.
// QEMU binds its sockets while it starts, before it applies -chroot or
// -daemonize (which also change its cwd to /), so:
//   - an abstract socket is "@NAME" (abstract names belong to a network
//     namespace: QEMU's must be netctl's);
//   - an absolute path goes through /proc/PID/root (QEMU in a container or
//     another mount namespace), except after -chroot, where it is
//     relative to the root QEMU started in: netctl's, assumed;
//   - a relative path goes through /proc/PID/cwd, unless -chroot or
//     -daemonize moved QEMU's cwd since: then the monitor is marked
//     unusable and --qmp with the full path is the way.
func resolveSocket(pid int, c Cmdline, m *Monitor) {
	if m.Unusable != "" || m.Path == "" {
		return
	}
	proc := filepath.Join(procRoot, strconv.Itoa(pid))
	switch {
	case m.Abstract:
		m.Socket = "@" + m.Path
	case filepath.IsAbs(m.Path) && c.Chroot != "":
		m.Socket = m.Path
	case filepath.IsAbs(m.Path):
		if sameRoot(proc) {
			m.Socket = m.Path
		} else {
			m.Socket = filepath.Join(proc, "root", m.Path)
		}
	case c.Chroot != "" || c.Daemonize:
		m.Unusable = "relative socket path and QEMU has since changed its cwd (-chroot or -daemonize): pass --qmp with the socket's full path"
	default:
		if cwd, err := os.Readlink(filepath.Join(proc, "cwd")); err == nil && sameRoot(proc) && filepath.IsAbs(cwd) {
			m.Socket = filepath.Join(cwd, m.Path)
		} else {
			m.Socket = filepath.Join(proc, "cwd", m.Path)
		}
	}
}

// sameRoot says whether the process at proc sees the same files under
// "/" as the calling thread: the same mount namespace and root.
func sameRoot(proc string) bool {
	theirs, err1 := os.Readlink(filepath.Join(proc, "ns", "mnt"))
	ours, err2 := os.Readlink("/proc/thread-self/ns/mnt")
	if err1 != nil || err2 != nil || theirs != ours {
		return false
	}
	r1, err1 := os.Readlink(filepath.Join(proc, "root"))
	r2, err2 := os.Readlink("/proc/thread-self/root")
	return err1 == nil && err2 == nil && r1 == r2
}

// StartTime reads the starttime of process pid (field 22 of
// /proc/PID/stat): recorded with a PID, it tells the same process from a
// later one that reused the PID. A process that is gone is ErrNotAvailable.
func StartTime(pid int) (uint64, error) {
	b, err := readBounded(filepath.Join(procRoot, strconv.Itoa(pid), "stat"), 4096)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("qemuproc: pid %d has exited: %w", pid, ErrNotAvailable)
	} else if err != nil {
		return 0, fmt.Errorf("qemuproc: pid %d: %w", pid, err)
	}
	return ParseStatStartTime(b)
}

// processState is the state letter of /proc/PID/stat ('R', 'S', 'T'
// stopped, 't' traced, 'Z', ...), or 0 when it cannot be read.
func processState(pid int) byte {
	b, err := readBounded(filepath.Join(procRoot, strconv.Itoa(pid), "stat"), 4096)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 || len(f[0]) != 1 {
		return 0
	}
	return f[0][0]
}

// ParseStatStartTime returns the starttime field (22) of a /proc/PID/stat
// line. The command name in parentheses may hold spaces and ')': the
// fields are counted after the last ')'.
func ParseStatStartTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("qemuproc: /proc stat line without ')': %w", ErrInvalid)
	}
	f := strings.Fields(string(stat[i+1:]))
	const idx = 22 - 3 // fields after ")" start at field 3 (state)
	if len(f) <= idx {
		return 0, fmt.Errorf("qemuproc: /proc stat line has %d fields after the name, want more than %d: %w", len(f), idx, ErrInvalid)
	}
	v, err := strconv.ParseUint(f[idx], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("qemuproc: /proc stat starttime %q: %w", clip(f[idx]), ErrInvalid)
	}
	return v, nil
}

// readBounded reads at most max bytes of a file.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// OfLibvirtDomain says whether v is the QEMU of the libvirt domain whose
// UUID is uuid: its monitor is libvirt's and its -uuid is the domain's.
// A same-named QEMU of another libvirtd (qemu:///session beside
// qemu:///system) or a hand-run one is not.
func (v VM) OfLibvirtDomain(uuid string) bool {
	if v.UUID == "" || v.UUID != strings.ToLower(uuid) {
		return false
	}
	for _, m := range v.Monitors {
		if m.Libvirt {
			return true
		}
	}
	return false
}
