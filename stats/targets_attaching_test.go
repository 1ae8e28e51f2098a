package stats

import (
	"os"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestStateTargetsSkipAttaching: an attach's intent record (status
// attaching: nothing is handed to QEMU yet, or the attach was killed
// and gc has not undone it) is no NIC to sample; only attached ones are.
func TestStateTargetsSkipAttaching(t *testing.T) {
	dir := t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, status := range []state.Status{state.StatusAttached, state.StatusAttaching} {
		m := "52:54:00:00:00:0" + string(rune('1'+i))
		n := &state.NIC{Schema: state.Schema, VM: "vm", QEMUPID: os.Getpid(), QEMUStart: 1, QMP: "/run/vm.qmp", ID: "n" + string(rune('1'+i)),
			Netdev: "netctl-n" + string(rune('1'+i)), Backend: "userspace", Queues: 1, MAC: m, Status: status, Attached: time.Now().UTC(),
			FDNames: []string{"netctl-n" + string(rune('1'+i)) + "-tap0"}}
		if err := st.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := StateTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].NIC != "n1" {
		t.Errorf("targets %+v, want only the attached n1", ts)
	}
}
