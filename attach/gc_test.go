package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/state"
)

// lockFiles lists the state directory's lock files.
func lockFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "locks"))
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// killFake makes the record of NIC id look like its QEMU exited (another
// start time, as for a reused pid) and closes the fake's socket.
func killFake(t *testing.T, q *fakeQEMU, dir string, nic *state.NIC) {
	t.Helper()
	st, _ := state.Open(dir)
	nic.QEMUStart++
	if err := st.Save(nic); err != nil {
		t.Fatal(err)
	}
	q.ln.Close()
	os.Remove(q.sock)
}

func findCollected(t *testing.T, res *GCResult, id string) Collected {
	t.Helper()
	for _, c := range res.NICs {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("gc says nothing about %s: %+v", id, res.NICs)
	return Collected{}
}

// TestGCQEMUGone: one VM's QEMU exited, another's runs. --dry-run says
// what it would do and changes nothing; gc deletes the dead VM's macvtap
// (netctl created it), leaves the tap netctl only opened, removes both
// records and the dead VM's lock file; the running VM's NIC, link, record
// and lock stay. A second gc does nothing.
func TestGCQEMUGone(t *testing.T) {
	dead, live, h, dir := newFakeQEMU(t), newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	live.mu.Lock() // its monitor already serves (a connection may be reading the name)
	live.name = "vm2"
	live.mu.Unlock()
	h.links["tap9"] = 9
	mv, err := Attach(ctxT(t), Request{QMP: dead.sock, ID: "mv", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	t9, err := Attach(ctxT(t), Request{QMP: dead.sock, ID: "t9", Tap: "tap9", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := Attach(ctxT(t), Request{QMP: live.sock, ID: "keep", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	killFake(t, dead, dir, mv)
	killFake(t, dead, dir, t9)
	running := func() ([]string, error) { return []string{live.sock}, nil }
	before, locksBefore := records(t, dir), lockFiles(t, dir)
	if len(locksBefore) != 2 {
		t.Fatalf("lock files %v", locksBefore)
	}

	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, DryRun: true, RunningSockets: running})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "mv"); c.Verdict != GCQEMUGone || c.Action != GCWouldRemove ||
		!slices.Equal(c.Done, []string{"would delete macvtap " + mv.Macvtap.Name, "would remove the record"}) {
		t.Errorf("dry run, mv: %+v", c)
	}
	if c := findCollected(t, res, "keep"); c.Verdict != GCInUse || c.Action != GCKept || len(c.Done) != 0 {
		t.Errorf("dry run, keep: %+v", c)
	}
	if n := countLocks(res, GCWouldRemove); n != 1 {
		t.Errorf("dry run locks: %+v", res.Locks)
	}
	if !slices.Equal(records(t, dir), before) || !slices.Equal(lockFiles(t, dir), locksBefore) ||
		!h.LinkExists(mv.Macvtap.Name, mv.Macvtap.Ifindex) {
		t.Errorf("dry run changed something: records %v, locks %v, host %s", records(t, dir), lockFiles(t, dir), h.left())
	}

	res, err = GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: running})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "mv"); c.Action != GCRemoved || !slices.Equal(c.Done, []string{"deleted macvtap " + mv.Macvtap.Name, "removed the record"}) ||
		c.Why != fmt.Sprintf("QEMU pid %d has exited", mv.QEMUPID) {
		t.Errorf("mv: %+v", c)
	}
	if c := findCollected(t, res, "t9"); c.Action != GCRemoved || !slices.Equal(c.Done, []string{"left tap tap9 alone (netctl did not create it)", "removed the record"}) {
		t.Errorf("t9: %+v", c)
	}
	if c := findCollected(t, res, "keep"); c.Action != GCKept {
		t.Errorf("keep: %+v", c)
	}
	if h.LinkExists(mv.Macvtap.Name, 0) || !h.LinkExists("tap9", 9) || !h.LinkExists(keep.Macvtap.Name, keep.Macvtap.Ifindex) {
		t.Errorf("host after gc: %s", h.left())
	}
	if r := records(t, dir); !slices.Equal(r, []string{"vm2@keep.json"}) {
		t.Errorf("records after gc: %v", r)
	}
	if l := lockFiles(t, dir); !slices.Equal(l, []string{state.LockKey(live.sock) + ".lock"}) {
		t.Errorf("lock files after gc: %v (results %+v)", l, res.Locks)
	}
	if got := live.left(); got != "device keep, netdev netctl-keep" {
		t.Errorf("the running QEMU holds %q", got)
	}

	res, err = GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: running})
	if err != nil || len(res.NICs) != 1 || res.NICs[0].Action != GCKept || countLocks(res, GCRemoved) != 0 {
		t.Errorf("second gc: %+v %v", res, err)
	}
}

func countLocks(res *GCResult, action string) int {
	n := 0
	for _, l := range res.Locks {
		if l.Action == action {
			n++
		}
	}
	return n
}

// TestGCNICGoneFromRunningQEMU: QEMU runs but lost the NIC (device and
// netdev deleted behind netctl's back): gc deletes the macvtap and the
// record. With the netdev still there (device released, netdev not yet
// deleted) gc keeps it and says detach finishes it.
func TestGCNICGoneFromRunningQEMU(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	a, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "a", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "b", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	delete(q.devices, "a")
	delete(q.devices, "b")
	for _, fd := range q.netdevs["netctl-a"] {
		unix.Close(fd)
	}
	delete(q.netdevs, "netctl-a")
	q.mu.Unlock()
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: func() ([]string, error) { return []string{q.sock}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "a"); c.Verdict != GCNICGone || c.Action != GCRemoved || !slices.Contains(c.Done, "deleted macvtap "+a.Macvtap.Name) {
		t.Errorf("a: %+v", c)
	}
	if c := findCollected(t, res, "b"); c.Verdict != GCNetdevLeft || c.Action != GCKept || !strings.Contains(c.Why, "run netctl detach --id b") {
		t.Errorf("b: %+v", c)
	}
	if r := records(t, dir); !slices.Equal(r, []string{"vm1@b.json"}) {
		t.Errorf("records %v", r)
	}
	if len(res.Locks) != 1 || res.Locks[0].Action != GCKept {
		t.Errorf("locks %+v", res.Locks)
	}
	// detach finishes b; then nothing is left.
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "b", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, "after gc and detach", q, h, dir)
}

// TestGCLeavesBusyVMsAlone: while an attach or detach holds the VM's lock
// gc leaves its records alone; a QEMU whose monitor another client holds
// cannot be asked, so its records stay; a held lock file stays.
func TestGCLeavesBusyVMsAlone(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	killFake(t, q, dir, nic)
	st, _ := state.Open(dir)
	lock, err := st.Lock(ctxT(t), state.LockKey(q.sock))
	if err != nil {
		t.Fatal(err)
	}
	none := func() ([]string, error) { return nil, nil }
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, LockWait: 100 * time.Millisecond, RunningSockets: none})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "n1"); c.Action != GCKept || !strings.Contains(c.Why, "could not take the VM's lock") {
		t.Errorf("n1 under a held lock: %+v", c)
	}
	if len(res.Locks) != 1 || res.Locks[0].Action != GCKept {
		t.Errorf("locks %+v", res.Locks)
	}
	if len(records(t, dir)) != 1 || !h.LinkExists(nic.Macvtap.Name, 0) {
		t.Error("gc changed a VM whose lock is held")
	}
	lock.Unlock()

	// A live QEMU whose monitor is held by another client.
	q2, dir2 := newFakeQEMU(t), t.TempDir()
	if _, err := Attach(ctxT(t), Request{QMP: q2.sock, ID: "n2", Macvtap: "eth0", StateDir: dir2, Host: h}); err != nil {
		t.Fatal(err)
	}
	c, err := dialQMP(ctxT(t), q2.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err = GC(ctxT(t), GCRequest{StateDir: dir2, Host: h, CheckTimeout: 200 * time.Millisecond, RunningSockets: none})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "n2"); c.Verdict != GCUnknown || c.Action != GCKept || !strings.Contains(c.Why, "could not be asked") {
		t.Errorf("n2 with its monitor held: %+v", c)
	}
}

// TestGCCleanupFails: deleting the macvtap fails: the record stays, the
// result says why, GC returns an error; the next gc finishes.
func TestGCCleanupFails(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	killFake(t, q, dir, nic)
	h.fail["DeleteLink"] = h.calls["DeleteLink"] + 1
	none := func() ([]string, error) { return nil, nil }
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: none})
	if err == nil || !strings.Contains(err.Error(), "injected failure of DeleteLink") {
		t.Errorf("gc with a failing delete: %v", err)
	}
	if c := findCollected(t, res, "n1"); c.Action != GCFailed || !strings.Contains(c.Error, "the record stays") {
		t.Errorf("n1: %+v", c)
	}
	if len(records(t, dir)) != 1 || len(lockFiles(t, dir)) != 1 {
		t.Errorf("after a failed gc: records %v, locks %v", records(t, dir), lockFiles(t, dir))
	}
	if _, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: none}); err != nil {
		t.Fatal(err)
	}
	if l, r := h.left(), records(t, dir); l != "" || len(r) != 0 {
		t.Errorf("after the second gc: host %s, records %v", l, r)
	}
	if l := lockFiles(t, dir); len(l) != 0 {
		t.Errorf("lock files %v", l)
	}
}

// TestGCUnreadableRecord: a broken record file is reported and left
// alone, and lock files stay (which VM it belongs to is unknown).
func TestGCUnreadableRecord(t *testing.T) {
	dir := t.TempDir()
	st, _ := state.Open(dir)
	l, _ := st.Lock(context.Background(), "sock-x")
	l.Unlock()
	bad := filepath.Join(dir, "nics", "vm1@n1.json")
	os.WriteFile(bad, []byte(`{"schema":`), 0o600)
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: newFakeHost(t, "probe-host-root.json"), RunningSockets: func() ([]string, error) { return nil, errors.New("unused") }})
	if err != nil || len(res.Unreadable) != 1 || !strings.Contains(res.Unreadable[0], bad) || len(res.Locks) != 1 || res.Locks[0].Action != GCKept {
		t.Errorf("gc with a broken record: %+v %v", res, err)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("the broken record: %v", err)
	}
}

// TestGCDuringAttachDetach: gc runs again and again while 8 workers
// attach and detach NICs across 4 VMs (all running). It must never
// collect a NIC (each is in QEMU, or on its way in or out under the VM's
// lock), and removing lock files of VMs with no record at that moment
// (none counts as running here) must not let two attaches or detaches on
// one VM overlap: every call succeeds and nothing is left.
func TestGCDuringAttachDetach(t *testing.T) {
	h, dir := newFakeHost(t, "probe-6.12.json"), t.TempDir()
	vms := newFakeVMs(t, 4)
	stop := make(chan struct{})
	gcDone := make(chan struct{})
	runs, locksRemoved := 0, 0
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := GC(context.Background(), GCRequest{StateDir: dir, Host: h, RunningSockets: func() ([]string, error) { return nil, nil }})
			if err != nil {
				t.Errorf("gc: %v", err)
				return
			}
			runs++
			for _, c := range res.NICs {
				if c.Action != GCKept || (c.Verdict != GCInUse && c.Verdict != GCNetdevLeft) {
					t.Errorf("gc during attach/detach: %+v", c)
				}
			}
			locksRemoved += countLocks(res, GCRemoved)
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				q := vms[(w+i)%4]
				id := fmt.Sprintf("w%dn%d", w, i)
				if _, err := Attach(context.Background(), Request{QMP: q.sock, ID: id, StateDir: dir, Host: h}); err != nil {
					t.Errorf("attach %s: %v", id, err)
					continue
				}
				if err := Detach(context.Background(), DetachRequest{QMP: q.sock, ID: id, StateDir: dir, Host: h}); err != nil {
					t.Errorf("detach %s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-gcDone
	for _, q := range vms {
		nothingLeft(t, q.sock, q, h, dir)
	}
	if runs == 0 {
		t.Error("gc never ran alongside the workers: the test checked nothing")
	}
	t.Logf("%d gc runs alongside 64 attach/detach pairs; %d lock files removed on the way", runs, locksRemoved)
}

// TestGCOtherNetns: a record attached from another network namespace
// (its link lives there; one here with the same name and ifindex is
// another link) is kept with the way out, and the link here is left.
func TestGCOtherNetns(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	here, err := state.NetNS()
	if err != nil || nic.NetNS != here || here == 0 {
		t.Fatalf("record's netns %d, this thread's %d (%v)", nic.NetNS, here, err)
	}
	nic.NetNS++
	killFake(t, q, dir, nic)
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: h, RunningSockets: func() ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if c := findCollected(t, res, "n1"); c.Action != GCKept || !strings.Contains(c.Why, fmt.Sprintf("another network namespace (net:[%d])", nic.NetNS)) ||
		!strings.Contains(c.Why, "ip netns exec NAME netctl gc") {
		t.Errorf("n1: %+v", c)
	}
	if !h.LinkExists(nic.Macvtap.Name, nic.Macvtap.Ifindex) || len(records(t, dir)) != 1 || len(lockFiles(t, dir)) != 1 {
		t.Errorf("gc changed something: host %s, records %v, locks %v", h.left(), records(t, dir), lockFiles(t, dir))
	}
}

// TestGCDryRunNoStateDir: a dry run where netctl never ran creates
// nothing (not even the state directory) and finds nothing.
func TestGCDryRunNoStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, DryRun: true, Host: newFakeHost(t, "probe-host-root.json")})
	if err != nil || len(res.NICs) != 0 || len(res.Locks) != 0 {
		t.Errorf("dry run: %+v %v", res, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dry run made %s: %v", dir, err)
	}
}
