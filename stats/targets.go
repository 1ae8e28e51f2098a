package stats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// Targets lists every NIC in netctl's state (stateDir, "" = default),
// plus, for vm/qmpSock != "", every virtio-net device of that QEMU (found
// over QMP: x-query-virtio, the device's netdev, its type from "info
// network", vhost from x-query-virtio-status). A NIC both in the state
// and in QEMU is listed once, from the state (which knows its tap).
//
// A state directory that does not exist is no NICs; unreadable records
// are skipped (netctl list reports them). The QMP connection, if any, is
// closed before Targets returns. Errors: the VM cannot be found or its
// monitor cannot be used (qemuproc's error: busy names the holder).
func Targets(ctx context.Context, stateDir, vm, qmpSock string) ([]Target, error) {
	if stateDir == "" {
		stateDir = state.DefaultDir
	}
	ts, err := stateTargets(stateDir)
	if err != nil {
		return nil, err
	}
	if vm == "" && qmpSock == "" {
		return ts, nil
	}
	found, err := qemuTargets(ctx, vm, qmpSock)
	if err != nil {
		return nil, err
	}
	return mergeTargets(ts, found), nil
}

// StateTargets lists every NIC in netctl's state (dir, "" = default):
// what Targets lists without a VM. (Extension of the agreed API: the
// exporter reads the state once per scrape.)
func StateTargets(dir string) ([]Target, error) {
	if dir == "" {
		dir = state.DefaultDir
	}
	return stateTargets(dir)
}

// QEMUTargets lists the virtio-net NICs of one QEMU (by -name or QMP
// socket) over QMP, without the state. (Extension of the agreed API.)
func QEMUTargets(ctx context.Context, vm, qmpSock string) ([]Target, error) {
	return qemuTargets(ctx, vm, qmpSock)
}

// MergeTargets adds found (a QEMU's listing) to ts (the state's),
// leaving out the NICs ts already has (same QEMU pid and NIC id).
func MergeTargets(ts, found []Target) []Target { return mergeTargets(ts, found) }

// stateTargets turns netctl's NIC records into targets.
func stateTargets(dir string) ([]Target, error) {
	if _, err := os.Stat(filepath.Join(dir, "nics")); errors.Is(err, os.ErrNotExist) {
		return nil, nil // nothing attached yet; reading creates nothing
	}
	st, err := state.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("stats: state %s: %w", dir, err)
	}
	nics, _, err := st.List("")
	if err != nil {
		return nil, fmt.Errorf("stats: state %s: %w", dir, err)
	}
	var ts []Target
	for _, n := range nics {
		if n.Status == state.StatusAttaching {
			continue // an attach's intent: nothing handed to QEMU yet, or gc's to undo
		}
		ts = append(ts, fromRecord(n))
	}
	return ts, nil
}

// fromRecord is the target of one NIC record.
func fromRecord(n *state.NIC) Target {
	t := Target{VM: n.VM, NIC: n.ID, Netdev: n.Netdev, QMP: n.QMP, PID: n.QEMUPID, PIDStart: n.QEMUStart,
		Backend: n.Backend, QueuePairs: n.Queues, Attached: n.Attached}
	switch {
	case n.Tap != nil:
		t.Link, t.Ifindex = n.Tap.Name, n.Tap.Ifindex
	case n.Macvtap != nil:
		t.Link, t.Ifindex = n.Macvtap.Name, n.Macvtap.Ifindex
	}
	// netctl attaches a tap netdev (its own tap or macvtap, with or
	// without vhost fds) or a vhost-vdpa one (attach/backend.go).
	t.NetdevType = "tap"
	if n.Backend == policy.BackendVDPA {
		t.NetdevType = "vhost-vdpa"
	}
	if n.VDPA != nil {
		t.VDPA = n.VDPA.Name
	}
	if t.QueuePairs < 1 {
		t.QueuePairs = 1
	}
	if l := n.Libvirt; l != nil {
		t.Libvirt = &LibvirtTarget{URI: l.URI, UUID: l.UUID, Alias: l.Alias}
	}
	return t
}

// qemuTargets asks a QEMU for its virtio-net NICs.
func qemuTargets(ctx context.Context, name, sock string) ([]Target, error) {
	vm, err := qemuproc.Resolve(ctx, name, sock)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	c, err := qemuproc.Dial(ctx, vm)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer c.Close()
	pid, err := c.PeerPID()
	if err != nil {
		return nil, fmt.Errorf("stats: QEMU's pid: %w", err)
	}
	start, _ := qemuproc.StartTime(pid)
	monitor := usedMonitor(vm, sock)
	label := vm.Name // for errors: the VM's -name, else its socket
	if label == "" {
		label = monitor
	}
	raw, err := c.Execute(ctx, "x-query-virtio", nil)
	if err != nil {
		return nil, fmt.Errorf("stats: VM %s: %w", label, qmpErr("x-query-virtio", err))
	}
	paths, err := parseVirtioList(raw)
	if err != nil {
		return nil, fmt.Errorf("stats: VM %s: %w", label, err)
	}
	var info string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &info); err != nil {
		return nil, fmt.Errorf("stats: VM %s: info network: %w", label, err)
	}
	ts, err := describeNICs(ctx, c, paths, info, pid)
	if err != nil {
		return nil, fmt.Errorf("stats: VM %s %w", label, err)
	}
	for i := range ts {
		ts[i].VM, ts[i].QMP, ts[i].PIDStart = vm.Name, monitor, start
	}
	// QEMU lists its devices newest first: sort for a stable order.
	slices.SortFunc(ts, func(a, b Target) int { return strings.Compare(a.NIC, b.NIC) })
	return ts, nil
}

// usedMonitor is the socket later collections dial: the one given, or
// the first the VM's command line names that netctl can use.
func usedMonitor(vm qemuproc.VM, sock string) string {
	if sock != "" {
		return sock
	}
	for _, m := range vm.Monitors {
		if m.Socket != "" && m.Unusable == "" && !m.Libvirt {
			return m.Socket
		}
	}
	return ""
}

// describeNICs describes the virtio-net devices paths of the QEMU pid
// (its monitor c, its "info network" text): each one's netdev, backend,
// link and queue pairs.
//
// Whether a tap has vhost: QEMU says so (vhost-started, vhost-dev) only
// while vhost runs, and it stops while the VM is paused or the NIC's
// link is down. So a tap whose vhost runs now is vhost-net, and one
// whose vhost does not is vhost-net when QEMU holds more /dev/vhost-net
// fds (one per queue pair of a vhost tap, held from netdev_add to its
// removal) than the queue pairs of its running vhost NICs: one label
// through pauses and link flaps. (A paused QEMU with both a vhost and a
// userspace tap shows both as vhost-net until vhost runs again.)
func describeNICs(ctx context.Context, c *qmp.Client, paths []string, info string, pid int) ([]Target, error) {
	var ts []Target
	var sts []*virtioStatus
	running := 0 // queue pairs of NICs whose vhost runs
	for _, p := range paths {
		t := Target{NIC: nicID(p), PID: pid, QueuePairs: 1}
		st, err := queryVirtioStatus(ctx, c, p)
		if err != nil {
			return nil, fmt.Errorf("NIC %s: %w", t.NIC, err)
		}
		if st.NumVQs >= 2 {
			t.QueuePairs = st.NumVQs / 2
		}
		if st.VhostStarted || st.VhostDev != nil {
			running += t.QueuePairs
		}
		ts, sts = append(ts, t), append(sts, st)
	}
	spare := vhostNetFDs(pid) - running
	for i, p := range paths {
		if err := describeNIC(ctx, c, p, info, sts[i], spare > 0, &ts[i]); err != nil {
			return nil, fmt.Errorf("NIC %s: %w", ts[i].NIC, err)
		}
	}
	return ts, nil
}

// maxFDs bounds the fds read from /proc/PID/fd.
const maxFDs = 1 << 16

// vhostNetFDs counts QEMU's open /dev/vhost-net fds (0 when they cannot
// be read).
func vhostNetFDs(pid int) int {
	if pid <= 0 {
		return 0
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	fds, err := listPIDs(dir) // fd numbers: the same bounded listing
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds[:min(len(fds), maxFDs)] {
		if isVhostNet(filepath.Join(dir, strconv.Itoa(fd))) {
			n++
		}
	}
	return n
}

// vhostNetMinor is /dev/vhost-net's misc minor (VHOST_NET_MINOR).
const vhostNetMinor = 238

// isVhostNet says the fd link is /dev/vhost-net: by its device number
// (misc 10:238), whatever path a chrooted or namespaced QEMU opened it
// under, else by name.
func isVhostNet(link string) bool {
	var st unix.Stat_t
	if unix.Stat(link, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return unix.Major(st.Rdev) == 10 && unix.Minor(st.Rdev) == vhostNetMinor
	}
	l, err := os.Readlink(link)
	return err == nil && filepath.Base(l) == "vhost-net"
}

// describeNIC fills a target's netdev, backend and link. spareVhost:
// QEMU holds /dev/vhost-net fds that no running vhost NIC accounts for.
func describeNIC(ctx context.Context, c *qmp.Client, path, info string, st *virtioStatus, spareVhost bool, t *Target) error {
	dev, ok := strings.CutSuffix(path, "/virtio-backend")
	if !ok {
		return fmt.Errorf("QOM path %q is not DEVICE/virtio-backend: %w", path, ErrInvalid)
	}
	if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": "netdev"}, &t.Netdev); err != nil {
		return fmt.Errorf("its netdev: %w", err)
	}
	nd, err := diagnose.ParseInfoNetwork(info, t.Netdev)
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return err
		}
		nd = diagnose.Netdev{}
	}
	t.NetdevType = nd.Type
	switch nd.Type {
	case "vhost-vdpa":
		t.Backend = policy.BackendVDPA
	case "vhost-user":
		t.Backend = BackendVhostUser
	case "tap":
		t.Backend = policy.BackendUserspace
		if st.VhostStarted || st.VhostDev != nil || spareVhost {
			t.Backend = policy.BackendVhostNet
		}
		t.Link = nd.Options["ifname"]
		if fds := passedFDs(nd.Options); t.Link == "" && len(fds) > 0 {
			// A tap QEMU got as an fd (netctl attach, libvirt): its name
			// from QEMU's fdinfo.
			if name, ifi, err := fdLink(t.PID, fds[0]); err == nil {
				t.Link, t.Ifindex = name, ifi
				if name == "" && ifi > 0 {
					if l, err := netlink.LinkByIndex(ifi); err == nil {
						t.Link = l.Attrs().Name
					}
				}
			}
		}
	default:
		// Netdevs QEMU serves itself (user, socket, ...); a type
		// "info network" did not give is taken as one.
		t.Backend = policy.BackendUserspace
	}
	return nil
}

// mergeTargets adds found to ts, leaving out NICs ts already has (same
// QEMU pid and NIC id).
//
// A libvirt domain's NIC is the same one when the domain (UUID) and the
// alias are: netctl's record of it knows no QEMU pid.
func mergeTargets(ts, found []Target) []Target {
	have := map[string]bool{}
	for _, t := range ts {
		have[fmt.Sprint(t.PID, "\x00", t.NIC)] = true
		if l := t.Libvirt; l != nil {
			have["lv\x00"+l.UUID+"\x00"+l.Alias] = true
		}
	}
	for _, t := range found {
		if have[fmt.Sprint(t.PID, "\x00", t.NIC)] {
			continue
		}
		if l := t.Libvirt; l != nil && have["lv\x00"+l.UUID+"\x00"+l.Alias] {
			continue
		}
		ts = append(ts, t)
	}
	return ts
}
