package attach

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestDetachSocketServedByAnotherQEMU: the QEMU a record names still runs,
// but another process serves its QMP socket now (a second QEMU started
// with the same -qmp path: QEMU unlinks and binds it again). The NIC is
// still in the first QEMU, on its tap: detach cannot unplug it there, so
// it must change nothing and say so. Before the fix detach took the first
// QEMU for gone, deleted the tap under it and removed the record.
func TestDetachSocketServedByAnotherQEMU(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	// The "first QEMU": a running process other than the one serving the
	// socket (the fake serves from this test's process).
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	start, err := state.ProcStartTime(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	nic.QEMUPID, nic.QEMUStart = other.Process.Pid, start
	st, _ := state.Open(dir)
	if err := st.Save(nic); err != nil {
		t.Fatal(err)
	}
	err = Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "still runs") {
		t.Errorf("detach: %v, want ErrConflict saying the recorded QEMU still runs", err)
	}
	if !h.LinkExists(nic.Tap.Name, nic.Tap.Ifindex) {
		t.Errorf("detach deleted tap %s under the QEMU that still uses it", nic.Tap.Name)
	}
	if len(records(t, dir)) != 1 {
		t.Error("detach removed the record of a NIC still in a running QEMU")
	}
}
