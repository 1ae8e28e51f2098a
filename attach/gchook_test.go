package attach

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestGCKeepsHookLocksOfRecordedDomains: the libvirt hook's per-domain
// lock files (locks/hook-*.lock) share the locks directory. gc removed
// those of running domains too, saying "no record and no running QEMU
// used it". It must keep the lock of a domain the hook has a record of,
// saying so, and remove the lock of one it has none of with words about
// the hook.
func TestGCKeepsHookLocksOfRecordedDomains(t *testing.T) {
	dir := t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveDomain(&state.Domain{Schema: state.DomainSchema, Name: "web1", Status: state.DomainStarted}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"web1", "gone1"} {
		l, err := st.Lock(context.Background(), state.DomainLockKey(d))
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
	res, err := GC(ctxT(t), GCRequest{StateDir: dir, Host: newFakeHost(t, "probe-host-root.json"), RunningSockets: func() ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]GCLock{}
	for _, l := range res.Locks {
		got[l.Key] = l
	}
	if l := got[state.DomainLockKey("web1")]; l.Action != GCKept || !strings.Contains(l.Why, "hook") {
		t.Errorf("lock of domain web1, which the hook has a record of: %+v; want kept, saying why", l)
	}
	if _, err := os.Stat(lockFile(st, state.DomainLockKey("web1"))); errors.Is(err, os.ErrNotExist) {
		t.Errorf("gc removed the lock file of domain web1")
	}
	if l := got[state.DomainLockKey("gone1")]; l.Action != GCRemoved || strings.Contains(l.Why, "QEMU") || !strings.Contains(l.Why, "hook") {
		t.Errorf("lock of domain gone1, with no hook record: %+v; want removed, with words about the hook", l)
	}
}
