package attach

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestDetachInterruptedAttach: netctl detach of a NIC whose attach was
// killed after getfd (its record still says attaching; QEMU holds the
// parked fd name; the macvtap exists, recorded by name only) closes the
// name in QEMU, deletes the macvtap and removes the record. Before the
// fix detach left the macvtap (a record without its ifindex was "not
// netctl's to delete") and the name parked in QEMU.
func TestDetachInterruptedAttach(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("52:54:00:00:00:31")
	if _, err := h.CreateMacvtap(MacvtapSpec{Name: "nctlmv7", Lower: "eth0", MAC: mac, Queues: 1}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	q.names["netctl-n1-tap0"] = -1
	q.mu.Unlock()
	start, _ := state.ProcStartTime(os.Getpid())
	n := &state.NIC{Schema: state.Schema, VM: "vm1", QEMUPID: os.Getpid(), QEMUStart: start, QMP: q.sock, ID: "n1", Netdev: NetdevID("n1"),
		Backend: "userspace", Queues: 1, MAC: mac.String(), Status: state.StatusAttaching, Attached: time.Now().UTC(),
		FDNames: []string{"netctl-n1-tap0"}, Macvtap: &state.Link{Name: "nctlmv7", Lower: "eth0", Mode: "bridge", Created: true}}
	if err := st.Save(n); err != nil {
		t.Fatal(err)
	}
	if err := Detach(ctxT(t), DetachRequest{QMP: q.sock, ID: "n1", StateDir: dir, Host: h}); err != nil {
		t.Fatal(err)
	}
	if got := q.left(); got != "" {
		t.Errorf("QEMU after detach holds %q", got)
	}
	if h.LinkExists("nctlmv7", 0) {
		t.Errorf("the interrupted attach's macvtap nctlmv7 is left")
	}
	if recs, _, _ := st.List(""); len(recs) != 0 {
		t.Errorf("records left: %d", len(recs))
	}
}
