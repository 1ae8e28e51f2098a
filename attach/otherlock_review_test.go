package attach

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestAttachLeavesRunningAttachOfSameNameAlone: two QEMU monitors share a
// record key (two QEMUs with one -name, as in a migration on one host,
// or one QEMU with two -qmp sockets), but locks are per socket. An attach
// through the other socket is running (it holds that socket's lock) and
// has written its intent record (status attaching) naming the macvtap it
// just created. An attach of the same id through this socket must not
// take that record for an interrupted attach (its lock is held) and
// delete the macvtap from under it.
func TestAttachLeavesRunningAttachOfSameNameAlone(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("52:54:00:00:00:03")
	if _, err := h.CreateMacvtap(MacvtapSpec{Name: "nctlmv3", Lower: "eth0", MAC: mac, Queues: 1}); err != nil {
		t.Fatal(err)
	}
	other := "/run/other-monitor.qmp"
	start, _ := state.ProcStartTime(os.Getpid())
	n := &state.NIC{Schema: state.Schema, VM: "vm1", QEMUPID: os.Getpid(), QEMUStart: start, QMP: other, ID: "n1", Netdev: NetdevID("n1"),
		Backend: "userspace", Queues: 1, MAC: mac.String(), Status: state.StatusAttaching, Attached: time.Now().UTC(),
		Macvtap: &state.Link{Name: "nctlmv3", Lower: "eth0", Mode: "bridge", Created: true}}
	if err := st.Save(n); err != nil {
		t.Fatal(err)
	}
	lock, err := st.Lock(context.Background(), state.LockKey(other)) // that attach runs
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = Attach(ctxT(t), Request{QMP: q.sock, VMName: "vm1", ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h})
	t.Logf("attach: %v", err)
	if !h.LinkExists("nctlmv3", 0) {
		t.Error("attach deleted nctlmv3, which a running attach through another socket just created")
	}
	if _, err := st.Load(state.VMKey("vm1"), "n1"); err != nil {
		t.Errorf("the running attach's record: %v", err)
	}
	// detach through this socket must not either
	err = Detach(ctxT(t), DetachRequest{QMP: q.sock, VMName: "vm1", ID: "n1", StateDir: dir, Host: h})
	t.Logf("detach: %v", err)
	if !h.LinkExists("nctlmv3", 0) {
		t.Error("detach deleted nctlmv3, which a running attach through another socket just created")
	}
	// Once that attach is gone (killed: its lock free), its record is an
	// interrupted attach that this socket's attach undoes.
	lock.Unlock()
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, VMName: "vm1", ID: "n1", Macvtap: "eth0", StateDir: dir, Host: h}); err != nil {
		t.Fatalf("attach after the other attach was killed: %v", err)
	}
	if h.LinkExists("nctlmv3", 0) {
		t.Error("nctlmv3 of the killed attach is left")
	}
}
