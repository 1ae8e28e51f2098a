package attach

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
)

// killReap kills QEMU pid (started by startChrootQEMU, a child of the
// test) and reaps it.
func killReap(t *testing.T, pid int) {
	t.Helper()
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait for QEMU %d: %v", pid, err)
	}
}

// TestVMGCVhostNet: in the test VM (6.12 and 6.1) the host's QEMU 7.2,
// chrooted and paused, gets a 2-queue vhost-net NIC from Attach (a tap
// netctl creates, two /dev/vhost-net), and is killed. gc finds the NIC's
// QEMU gone; the tap went with QEMU's fds (non-persistent), so gc only
// removes the record and the VM's lock file; a second gc does nothing.
func TestVMGCVhostNet(t *testing.T) {
	k := testenv.VM(t)
	sock, pid := startChrootQEMU(t, "gcvh", false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	nic, err := Attach(ctx, Request{QMP: sock, ID: "vh1", Queues: 2, StateDir: dir})
	if err != nil {
		t.Fatalf("attach on %s: %v", k.Name, err)
	}
	if nic.Backend != "vhost-net" || nic.Tap == nil || !nic.Tap.Created || !(RealHost{}).LinkExists(nic.Tap.Name, nic.Tap.Ifindex) {
		t.Fatalf("record %+v", nic)
	}
	killReap(t, pid)
	res, err := GC(ctx, GCRequest{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NICs) != 1 || res.NICs[0].Verdict != GCQEMUGone || res.NICs[0].Action != GCRemoved ||
		!slices.Equal(res.NICs[0].Done, []string{"tap " + nic.Tap.Name + " is already gone", "removed the record"}) {
		t.Errorf("gc on %s: %+v", k.Name, res.NICs)
	}
	if len(res.Locks) != 1 || res.Locks[0].Action != GCRemoved {
		t.Errorf("gc's locks: %+v", res.Locks)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after gc: %v", l)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after gc: %v", r)
	}
	res, err = GC(ctx, GCRequest{StateDir: dir})
	if err != nil || len(res.NICs) != 0 || len(res.Locks) != 0 {
		t.Errorf("second gc: %+v %v", res, err)
	}
}

// TestVMGCVDPA: on 6.12, Attach --mgmtdev vduse creates vdpa device
// netctl-v1 on a VDUSE device and hands QEMU its /dev/vhost-vdpa-N; QEMU
// is killed; gc deletes the vdpa device netctl created (vdpa dev del: it
// leaves /sys/bus/vdpa/devices) and the record. A vdpa device netctl
// only opened (--vdpa) is left alone: the second NIC, on another QEMU,
// uses netctl-v2, which the test created. On 6.1 (no vdpa) the attach
// fails at vdpa dev add, saying vdpa is missing, and gc finds nothing.
func TestVMGCVDPA(t *testing.T) {
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		sock, _ := startChrootQEMU(t, "gcvd", true)
		dir := m.TempDir()
		_, err := Attach(context.Background(), Request{QMP: sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
		m.Err(err, ErrNotAvailable, "create vdpa device on vduse", "vdpa")
		res, err := GC(context.Background(), GCRequest{StateDir: dir})
		m.Check(err == nil && len(res.NICs) == 0, "gc after a failed attach: %+v %v", res, err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	d1, err := vduse.Create(vduse.Config{Name: "netctl-v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	d2, err := vduse.Create(vduse.Config{Name: "netctl-v2"})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	// netctl-v2 is the test's (vdpa dev add, bound to vhost_vdpa).
	if _, err := (RealHost{}).CreateVDPA(ctx, VDPASpec{Name: "netctl-v2", Mgmtdev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer (RealHost{}).DeleteVDPA(context.Background(), "netctl-v2")
	sock, pid := startChrootQEMU(t, "gcvd", true)
	nic, err := Attach(ctx, Request{QMP: sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Backend != "vdpa" || nic.VDPA == nil || !nic.VDPA.Created || nic.VDPA.Name != "netctl-v1" {
		t.Fatalf("record %+v", nic)
	}
	sock2, pid2 := startChrootQEMU(t, "gcvd2", true)
	nic2, err := Attach(ctx, Request{QMP: sock2, ID: "v2", VDPA: "netctl-v2", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if nic2.Backend != "vdpa" || nic2.VDPA == nil || nic2.VDPA.Created {
		t.Fatalf("record %+v", nic2)
	}
	killReap(t, pid)
	killReap(t, pid2)
	res, err := GC(ctx, GCRequest{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, n := range res.NICs {
		got = append(got, append([]string{n.ID, n.Action}, n.Done...))
	}
	want := [][]string{
		{"v1", GCRemoved, "deleted vdpa device netctl-v1", "removed the record"},
		{"v2", GCRemoved, "left vdpa device netctl-v2 alone (netctl did not create it)", "removed the record"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("gc: %q, want %q", got, want)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-v1"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-v1 after gc: %v (want it deleted)", err)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-v2"); err != nil {
		t.Errorf("vdpa device netctl-v2 (not netctl's) after gc: %v", err)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after gc: %v", r)
	}
}
