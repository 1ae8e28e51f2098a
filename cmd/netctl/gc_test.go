package main

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/attach"
)

// TestPrintGC: one line per record and per lock file gc did something
// with, saying what and why; a failed record says what failed; a dry run
// ends with what would go.
func TestPrintGC(t *testing.T) {
	res := &attach.GCResult{
		NICs: []attach.Collected{
			{VM: "web1", ID: "n1", QMP: "/run/web1.qmp", QEMUPID: 42, Verdict: attach.GCQEMUGone, Why: "QEMU pid 42 has exited",
				Action: attach.GCWouldRemove, Done: []string{"would delete macvtap nctlmv0", "would remove the record"}},
			{QMP: "/run/x.qmp", ID: "n2", QEMUPID: 43, Verdict: attach.GCQEMUGone, Why: "QEMU pid 43 has exited",
				Action: attach.GCFailed, Error: "delete link nctlmv1: operation not permitted (the record stays)"},
			{VM: "db", ID: "n3", QEMUPID: 44, Verdict: attach.GCInUse, Why: "QEMU pid 44 has device n3", Action: attach.GCKept},
		},
		Locks: []attach.GCLock{
			{Key: "sock-a", File: "/run/netctl/locks/sock-a.lock", Action: attach.GCWouldRemove, Why: "no record and no running QEMU uses it"},
			{Key: "sock-b", File: "/run/netctl/locks/sock-b.lock", Action: attach.GCKept, Why: "a running QEMU serves QMP on /run/db.qmp"},
		},
		Unreadable: []string{"state: /run/netctl/nics/x.json: bad"},
	}
	var b strings.Builder
	printGC(&b, res, true)
	want := `unreadable record, left alone: state: /run/netctl/nics/x.json: bad
n1 on web1: would-remove: would delete macvtap nctlmv0, would remove the record (QEMU pid 42 has exited)
n2 on /run/x.qmp: failed: delete link nctlmv1: operation not permitted (the record stays) (QEMU pid 43 has exited)
n3 on db: kept (QEMU pid 44 has device n3)
lock /run/netctl/locks/sock-a.lock: would-remove (no record and no running QEMU uses it)
dry run: 1 record(s) and 1 lock file(s) would go; nothing was changed
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printGC(&b, &attach.GCResult{}, false)
	if b.String() != "nothing to collect: netctl has no records and no stale lock files\n" {
		t.Errorf("empty: %q", b.String())
	}
}

// TestGCUsage: gc takes no arguments and a positive --timeout (exit 2).
func TestGCUsage(t *testing.T) {
	for _, args := range [][]string{{"gc", "extra"}, {"gc", "--timeout", "0s"}, {"gc", "--bogus"}} {
		var out, errOut strings.Builder
		if code := runMain(append([]string{"netctl"}, args...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "netctl: gc: ") {
			t.Errorf("netctl %v: exit %d, %q", args, code, errOut.String())
		}
	}
}
