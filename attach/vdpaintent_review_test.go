package attach

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestAttachIntentNeverNamesOthersVDPA: a vdpa device called netctl-v1
// exists that no record names (an administrator's, or one left by
// something else). attach --mgmtdev --id v1 must fail without ever
// having a record that names it as its own: a kill while it tries
// (SIGKILL, OOM, a second Ctrl-C) would otherwise leave an attaching
// record from which gc, detach or a retried attach deletes the other's
// device. The test copies the records as CreateVDPA is called (what a
// kill then leaves) and runs gc on that copy.
func TestAttachIntentNeverNamesOthersVDPA(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12-vdpa.json"), t.TempDir()
	h.vdpas["netctl-v1"] = true // not netctl's: no record names it
	killed := t.TempDir()
	if _, err := state.Open(killed); err != nil {
		t.Fatal(err)
	}
	h.onCreateVDPA = func() {
		es, _ := os.ReadDir(filepath.Join(dir, "nics"))
		for _, e := range es {
			if b, err := os.ReadFile(filepath.Join(dir, "nics", e.Name())); err == nil {
				os.WriteFile(filepath.Join(killed, "nics", e.Name()), b, 0o600)
			}
		}
	}
	if _, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir, Host: h}); err == nil {
		t.Fatal("attach created vdpa device netctl-v1, which exists")
	} else {
		t.Logf("attach: %v", err)
	}
	if !h.vdpas["netctl-v1"] {
		t.Fatal("attach deleted vdpa device netctl-v1, which it did not create")
	}
	h.onCreateVDPA = nil
	res, err := GC(ctxT(t), GCRequest{StateDir: killed, Host: h, RunningSockets: func() ([]string, error) { return nil, nil }})
	t.Logf("gc after a kill at the create: %+v, %v", res, err)
	if !h.vdpas["netctl-v1"] {
		t.Error("gc, after a kill while attach created its vdpa device, deleted netctl-v1, which attach never created")
	}
}
