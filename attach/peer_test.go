package attach

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestAttachPeerIsTheVMFound: --vm NAME finds a QEMU by its pid; the
// connection attach then hands fds over must be served by that very
// process (checked with SO_PEERCRED on that connection), not by whoever
// serves the socket path by then. Before the fix attach dialled the path
// again and took any peer: here the fake QEMU (this process) is not the
// pid the lookup found, and attach passed it a tap.
func TestAttachPeerIsTheVMFound(t *testing.T) {
	q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-host-root.json"), t.TempDir()
	_, err := Attach(ctxT(t), Request{QMP: q.sock, ID: "n1", StateDir: dir, Host: h, QEMUPID: os.Getppid(), QEMUStart: 1})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "not the VM") {
		t.Errorf("attach to a socket served by another process than the VM found: %v; want ErrConflict saying so", err)
	}
	if got := h.left(); got != "" {
		t.Errorf("the host holds %s", got)
	}
	if got := q.left(); got != "" {
		t.Errorf("QEMU holds %s", got)
	}
}
