package attach

import (
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestAttachUndoDeviceStays: device_add's answer is lost (QEMU added the
// device) and the guest does not release it in the undo's wait (paused,
// or no hotplug support). The device then stays in the VM, on its
// netdev: the undo must keep the record (detach-timeout), the netdev and
// the link, and say to run detach, which then finishes it. Before the
// fix the record was removed and the netdev deleted under the device: a
// NIC with no backend that no netctl command knew of.
func TestAttachUndoDeviceStays(t *testing.T) {
	old := undoUnplugWait
	undoUnplugWait = 300 * time.Millisecond
	t.Cleanup(func() { undoUnplugWait = old })
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	q.mu.Lock()
	q.after["device_add"] = 1
	q.unplug = "never"
	q.mu.Unlock()
	_, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h})
	if err == nil {
		t.Fatal("attach succeeded")
	}
	if !strings.Contains(err.Error(), "netctl detach") {
		t.Errorf("error does not say to run netctl detach: %v", err)
	}
	if got := q.left(); got != "device n1, netdev netctl-n1" {
		t.Errorf("QEMU after the failed undo holds %q, want the device on its netdev", got)
	}
	ls, _, lerr := list(ctxT(t), ListRequest{StateDir: dir, Host: h})
	if lerr != nil || len(ls) != 1 || ls[0].ID != "n1" || ls[0].Status != state.StatusDetachTimeout || ls[0].Link != "present" {
		t.Fatalf("records after the failed undo: %+v %v (want n1, detach-timeout, its tap present)", ls, lerr)
	}
	detachAgain(t, q, h, dir, "detach after the failed undo")
}
