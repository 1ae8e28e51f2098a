package attach

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestAttachIntentRaceThroughTwoSockets: two attaches of one id on one VM
// name through two QMP sockets (two QEMUs with one -name, or one QEMU with
// two -qmp) take different locks, so both can pass the id check before
// either writes its intent record. The second must not overwrite the
// first's record (which then names nothing of the first attach's macvtap
// and fds, and is removed by the second's undo or detach): it fails, and
// the first's record stays as written.
func TestAttachIntentRaceThroughTwoSockets(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := state.ProcStartTime(os.Getpid())
	first := &state.NIC{Schema: state.Schema, VM: "vm1", QEMUPID: os.Getpid(), QEMUStart: start, QMP: "/run/other-monitor.qmp", ID: "n1",
		Netdev: NetdevID("n1"), Backend: "userspace", Queues: 1, MAC: "52:54:00:00:00:03", Status: state.StatusAttaching, Attached: time.Now().UTC(),
		Macvtap: &state.Link{Name: "nctlmv3", Lower: "eth0", Mode: "bridge", Created: true}}
	beforeIntent = func() {
		// The attach through the other socket writes its intent now,
		// having passed its own checks.
		if err := st.Save(first); err != nil {
			t.Error(err)
		}
	}
	defer func() { beforeIntent = nil }()
	_, err = Attach(ctxT(t), Request{QMP: q.sock, VMName: "vm1", ID: "n1", StateDir: dir, Host: h})
	t.Logf("attach: %v", err)
	if !errors.Is(err, ErrConflict) {
		t.Errorf("attach: %v; want a conflict", err)
	}
	got, lerr := st.Load(state.VMKey("vm1"), "n1")
	if lerr != nil || got.QMP != first.QMP || got.Macvtap == nil || got.Macvtap.Name != "nctlmv3" {
		t.Errorf("the first attach's record is now %+v, %v; want it as it wrote it", got, lerr)
	}
	if l := h.left(); l != "" {
		t.Errorf("left on the host: %s", l)
	}
}
