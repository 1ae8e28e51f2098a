package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
)

// macvtapsOn lists the nctlmvN links of the test's namespace.
func macvtapsOn(t *testing.T) []string {
	t.Helper()
	ls, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l.Attrs().Name, "nctlmv") {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// startStuckAttach starts netctl attach with a macvtap on lower against
// the stuck QMP server and waits until it is at netdev_add (the macvtap
// exists, its queues are getfd'ed into "QEMU").
func startStuckAttach(t *testing.T, bin, run string, q *stuckQMP, lower string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, "attach", "--qmp", q.sock, "--id", "n1", "--backend", "userspace", "--macvtap", lower)
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+run)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.netdevAdd:
	case <-time.After(60 * time.Second):
		kill(t, cmd)
		t.Fatalf("netctl attach never reached netdev_add: %s", stderr.String())
	}
	return cmd, &stderr
}

// TestHostAttachKilledLeavesNothing: netctl attach SIGKILLed at
// netdev_add (an OOM kill, a second Ctrl-C) has created a macvtap and
// passed its queue with getfd, and cannot undo anything. Its intent
// record must let netctl gc delete the macvtap and closefd the name in
// QEMU, and let a retried attach of the same id undo it before it
// starts. Before the fix the first record was written just before
// device_add: gc saw nothing and left nctlmv0 for good, and a retried
// attach made a second macvtap beside it.
func TestHostAttachKilledLeavesNothing(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	vethUp(t, "nvk0", "nvk1")
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("NETCTL_RUN_DIR", run)
	q := newStuckQMP(t)

	cmd, _ := startStuckAttach(t, bin, run, q, "nvk0")
	kill(t, cmd) // SIGKILL: no undo runs
	if got := macvtapsOn(t); len(got) != 1 {
		t.Fatalf("after SIGKILL at netdev_add, macvtaps %v; want the one attach made", got)
	}
	r := execNetctl(t, bin, "gc")
	t.Logf("netctl gc after the kill: %+v", r)
	if got := macvtapsOn(t); len(got) != 0 {
		t.Errorf("after gc, macvtaps %v are left: gc did not see the interrupted attach", got)
	}
	q.mu.Lock()
	all := strings.Join(q.all, ", ")
	q.mu.Unlock()
	if !strings.Contains(all, "closefd netctl-n1-tap0") {
		t.Errorf("QEMU got %q; want closefd netctl-n1-tap0 from gc (the queue parked in QEMU)", all)
	}
	if es, _ := os.ReadDir(filepath.Join(run, "nics")); len(es) != 0 {
		t.Errorf("records left after gc: %v", es)
	}

	// Killed again; this time attach itself is retried.
	cmd, _ = startStuckAttach(t, bin, run, q, "nvk0")
	kill(t, cmd)
	first := macvtapsOn(t)
	cmd, stderr := startStuckAttach(t, bin, run, q, "nvk0")
	if got := macvtapsOn(t); len(got) != 1 || len(first) != 1 {
		t.Errorf("a retried attach at netdev_add: macvtaps %v (after the kill: %v); want one, the interrupted attach's undone", got, first)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	t.Logf("retried attach, interrupted: %s", stderr.String())
	if got := macvtapsOn(t); len(got) != 0 {
		t.Errorf("after the retried attach rolled back, macvtaps %v are left", got)
	}
	if es, _ := os.ReadDir(filepath.Join(run, "nics")); len(es) != 0 {
		t.Errorf("records left: %v", es)
	}
}
