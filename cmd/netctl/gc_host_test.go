package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/qemutest"
)

// attachJSON runs netctl attach --json and returns the record.
func attachJSON(t *testing.T, bin string, args ...string) *state.NIC {
	t.Helper()
	r := execNetctl(t, bin, append([]string{"attach", "--json"}, args...)...)
	var n state.NIC
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &n) != nil {
		t.Fatalf("netctl attach %v: %+v", args, r)
	}
	return &n
}

func vethUp(t *testing.T, name, peer string) {
	t.Helper()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		t.Fatal(err)
	}
	testenv.LinkUp(t, name)
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Kill()
	cmd.Wait()
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

func linkThere(name string, ifindex int) bool {
	l, err := netlink.LinkByName(name)
	return err == nil && l.Attrs().Index == ifindex
}

// TestHostGC: netctl attach (userspace path) to two real, paused QEMU
// 7.2: on one a macvtap on a veth and a tap netctl creates, on the other
// a macvtap. QEMU one is killed. netctl list marks its NICs gone and
// points to gc; gc --dry-run says what it would do and changes nothing;
// gc deletes the dead VM's macvtap (the veth stays), removes its records
// and its lock file, and leaves the running VM's NIC, macvtap, record
// and lock alone (QEMU still has the device); a second gc does nothing.
func TestHostGC(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	t.Setenv("NETCTL_RUN_DIR", run)
	vethUp(t, "nvgc0", "nvgc1")
	deadSock, dead := qemutest.StartPaused(t, "gcdead")
	liveSock, _ := qemutest.StartPaused(t, "gclive")

	mv1 := attachJSON(t, bin, "--qmp", deadSock, "--id", "mv1", "--macvtap", "nvgc0")
	tp1 := attachJSON(t, bin, "--qmp", deadSock, "--id", "tp1")
	keep := attachJSON(t, bin, "--qmp", liveSock, "--id", "keep", "--macvtap", "nvgc0")
	if mv1.Macvtap == nil || !mv1.Macvtap.Created || tp1.Tap == nil || !tp1.Tap.Created || keep.Macvtap == nil || mv1.Backend != "userspace" {
		t.Fatalf("records %+v %+v %+v", mv1, tp1, keep)
	}
	kill(t, dead)

	r := execNetctl(t, bin, "list")
	if r.code != 0 || !strings.Contains(r.stdout, "QEMU pid "+itoa(mv1.QEMUPID)+" has exited: run netctl gc to clean up") ||
		!strings.Contains(r.stdout, "2 NIC(s) gone from their VM: run netctl gc") {
		t.Errorf("list after QEMU died: %+v", r)
	}
	t.Logf("netctl list:\n%s", r.stdout)

	nics, locks := filepath.Join(run, "nics"), filepath.Join(run, "locks")
	recsBefore, locksBefore := dirNames(t, nics), dirNames(t, locks)
	if len(recsBefore) != 3 || len(locksBefore) != 2 {
		t.Fatalf("records %v, locks %v", recsBefore, locksBefore)
	}
	deadLock := state.LockKey(deadSock) + ".lock"

	r = execNetctl(t, bin, "gc", "--dry-run")
	t.Logf("netctl gc --dry-run:\n%s%s", r.stdout, r.stderr)
	for _, want := range []string{
		"mv1 on gcdead: would-remove: would delete macvtap " + mv1.Macvtap.Name + ", would remove the record (QEMU pid " + itoa(mv1.QEMUPID) + " has exited)",
		"tp1 on gcdead: would-remove: tap " + tp1.Tap.Name + " is already gone, would remove the record",
		"keep on gclive: kept (QEMU pid " + itoa(keep.QEMUPID) + " has device keep)",
		"lock " + filepath.Join(locks, deadLock) + ": would-remove",
		"dry run: 2 record(s) and 1 lock file(s) would go; nothing was changed",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("gc --dry-run: exit %d, no %q", r.code, want)
		}
	}
	r = execNetctl(t, bin, "gc", "--dry-run", "--json")
	var res attach.GCResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || len(res.NICs) != 3 || len(res.Locks) != 2 {
		t.Errorf("gc --dry-run --json: %v %+v", err, r)
	}
	if !slices.Equal(dirNames(t, nics), recsBefore) || !slices.Equal(dirNames(t, locks), locksBefore) ||
		!linkThere(mv1.Macvtap.Name, mv1.Macvtap.Ifindex) {
		t.Errorf("the dry run changed something: records %v, locks %v, links %s", dirNames(t, nics), dirNames(t, locks), linkNames(t))
	}

	r = execNetctl(t, bin, "gc")
	t.Logf("netctl gc:\n%s%s", r.stdout, r.stderr)
	for _, want := range []string{
		"mv1 on gcdead: removed: deleted macvtap " + mv1.Macvtap.Name + ", removed the record (QEMU pid " + itoa(mv1.QEMUPID) + " has exited)",
		"tp1 on gcdead: removed: tap " + tp1.Tap.Name + " is already gone, removed the record",
		"keep on gclive: kept",
		"lock " + filepath.Join(locks, deadLock) + ": removed",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("gc: exit %d, no %q", r.code, want)
		}
	}
	if linkThere(mv1.Macvtap.Name, mv1.Macvtap.Ifindex) || !linkThere(keep.Macvtap.Name, keep.Macvtap.Ifindex) {
		t.Errorf("links after gc: %s", linkNames(t))
	}
	if _, err := netlink.LinkByName("nvgc0"); err != nil {
		t.Errorf("the veth after gc: %v", err)
	}
	if got := dirNames(t, nics); !slices.Equal(got, []string{"gclive@keep.json"}) {
		t.Errorf("records after gc: %v", got)
	}
	if got := dirNames(t, locks); !slices.Equal(got, []string{state.LockKey(liveSock) + ".lock"}) {
		t.Errorf("lock files after gc: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s := qemutest.Read(ctx, t, liveSock); !slices.Contains(s.Devices, "keep") || !strings.Contains(s.Network, "netctl-keep: index=") {
		t.Errorf("the running QEMU after gc: %+v", s)
	}

	links := linkNames(t)
	r = execNetctl(t, bin, "gc")
	if r.code != 0 || strings.Contains(r.stdout, "removed") || !strings.Contains(r.stdout, "nothing to collect") {
		t.Errorf("second gc: %+v", r)
	}
	if linkNames(t) != links || len(dirNames(t, nics)) != 1 || len(dirNames(t, locks)) != 1 {
		t.Errorf("the second gc changed something")
	}
	r = execNetctl(t, bin, "list")
	if !strings.Contains(r.stdout, "keep") || strings.Contains(r.stdout, "gone") {
		t.Errorf("list after gc: %+v", r)
	}
}

// TestHostDetachAfterQEMUDied: a real QEMU 7.2 with three netctl NICs
// (macvtaps on a veth) is killed. netctl detach cleans up each: named by
// --vm (no QEMU has that name any more: the record says the socket), by
// --qmp while the dead QEMU's socket file is still there, and by --qmp
// after the file is gone; and a NIC of a QEMU that quit (QEMU 7.2 unlinks
// its socket then). Each deletes the macvtap and the record; the veth
// stays. Detaching again says there is nothing.
func TestHostDetachAfterQEMUDied(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	t.Setenv("NETCTL_RUN_DIR", run)
	vethUp(t, "nvdt0", "nvdt1")
	sock, q := qemutest.StartPaused(t, "gcdet")
	var nics []*state.NIC
	for _, id := range []string{"a1", "a2", "a3"} {
		nics = append(nics, attachJSON(t, bin, "--qmp", sock, "--id", id, "--macvtap", "nvdt0"))
	}
	kill(t, q)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("a killed QEMU's socket file: %v", err)
	}

	for i, args := range [][]string{{"--vm", "gcdet"}, {"--qmp", sock}, {"--qmp", sock}} {
		n := nics[i]
		if i == 2 {
			os.Remove(sock)
		}
		r := execNetctl(t, bin, append([]string{"detach", "--id", n.ID}, args...)...)
		if r.code != 0 || r.stdout != "detached "+n.ID+"\n" {
			t.Errorf("detach %s %v after QEMU died: %+v", n.ID, args, r)
		}
		if linkThere(n.Macvtap.Name, n.Macvtap.Ifindex) {
			t.Errorf("%s's macvtap %s is still there", n.ID, n.Macvtap.Name)
		}
	}
	if got := dirNames(t, filepath.Join(run, "nics")); len(got) != 0 {
		t.Errorf("records left: %v", got)
	}
	if _, err := netlink.LinkByName("nvdt0"); err != nil {
		t.Errorf("the veth: %v", err)
	}
	// QEMU 7.2 unlinks its QMP socket when it quits cleanly (a killed one
	// leaves the file): detach --qmp still finds the record.
	qsock, qq := qemutest.StartPaused(t, "gcquit")
	a4 := attachJSON(t, bin, "--qmp", qsock, "--id", "a4", "--macvtap", "nvdt0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := qmpRun(ctx, qsock, "quit"); err != nil {
		t.Fatal(err)
	}
	qq.Wait()
	if _, err := os.Stat(qsock); !os.IsNotExist(err) {
		t.Errorf("the socket of a QEMU that quit: %v", err)
	}
	r := execNetctl(t, bin, "detach", "--qmp", qsock, "--id", "a4")
	if r.code != 0 || linkThere(a4.Macvtap.Name, a4.Macvtap.Ifindex) {
		t.Errorf("detach a4 after QEMU quit: %+v", r)
	}
	if got := dirNames(t, filepath.Join(run, "nics")); len(got) != 0 {
		t.Errorf("records left after a4: %v", got)
	}

	r = execNetctl(t, bin, "detach", "--vm", "gcdet", "--id", "a1")
	if r.code != 1 || !strings.Contains(r.stderr, `no VM named "gcdet"`) {
		t.Errorf("detach again by --vm: %+v", r)
	}
	r = execNetctl(t, bin, "detach", "--qmp", sock, "--id", "a3")
	if r.code != 2 || !strings.Contains(r.stderr, "name QEMU's QMP socket") {
		t.Errorf("detach again by --qmp: %+v", r)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
