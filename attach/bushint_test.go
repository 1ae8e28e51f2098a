package attach

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/state"
)

// TestBusHintThatLies: the records (state.Store.Buses) say NICs of
// this QEMU process sit on rp3 (really free) and on a port that does not
// exist, and the record directory holds a FIFO, a directory and garbage
// under this VM's record names; rp1 and rp2 are taken. Attach must still
// take the one truly free port, rp3, and not fail because of the hint.
func TestBusHintThatLies(t *testing.T) {
	q := newFakeQEMU(t)
	q.mu.Lock()
	q.name = "vm1"
	q.machine, q.rootPorts = "pc-q35-7.2-machine", []string{"rp1", "rp2", "rp3"}
	q.onPort = map[string]string{"rp1": "a", "rp2": "b"}
	q.devices["a"], q.devices["b"], q.devices["liar"] = "na", "nb", "nl"
	q.mu.Unlock()
	h := newFakeHost(t, "probe-6.12.json")
	dir := t.TempDir()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := state.ProcStartTime(os.Getpid())
	for id, bus := range map[string]string{"liar": "rp3", "a": "nope", "b": "rp3"} {
		n := &state.NIC{Schema: state.Schema, VM: "vm1", QEMUPID: os.Getpid(), QEMUStart: start, QMP: q.sock, ID: id, Netdev: NetdevID(id),
			Backend: "userspace", Queues: 1, MAC: "52:54:00:00:00:41", Status: state.StatusAttached, Attached: time.Now().UTC(),
			Properties: map[string]string{"bus": bus}}
		if err := st.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	nics := filepath.Join(dir, "nics")
	if err := unix.Mkfifo(filepath.Join(nics, "vm1@fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(nics, "vm1@dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nics, "vm1@junk.json"), []byte(`{"id":"junk","properties":{"bus":7}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	nic, err := Attach(ctxT(t), Request{QMP: q.sock, StateDir: dir, Host: h, ID: "n", MAC: "52:54:00:00:00:42", Backend: "userspace"})
	if err != nil {
		t.Fatalf("attach with a lying hint: %v", err)
	}
	if got := nic.Properties["bus"]; got != "rp3" {
		t.Fatalf("attach went to bus %q, want the only free port rp3", got)
	}
}
