package vhostuser

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestBridgeResetOwnerFailure: RESET_OWNER releases the devices and takes
// them again; when taking them fails (on 6.12 VHOST_SET_OWNER starts a
// worker thread, which RLIMIT_NPROC of the owner's uid, the VMM's, can
// refuse), the front-end is told, and at its disconnect the session
// released the devices a second time: VHOST_RESET_OWNER of a device with
// no owner is EPERM, which Serve takes as a bridge that cannot go on, so
// one front-end's request stopped the bridge for good.
func TestBridgeResetOwnerFailure(t *testing.T) {
	r := startBridge(t, 2, nil)
	f := dialFrontend(t, r.path)
	f.setup()
	r.k.failAfter("SetOwner", 1, unix.EAGAIN) // device 1 refuses
	f.refused(ResetOwner, nil)
	f.c.Close()
	r.waitIdle(t, 1)
	g := dialFrontend(t, r.path)
	g.handshake(2)
	if st := r.b.Status(); !st.Connected {
		t.Errorf("status %+v: the bridge does not serve the next front-end", st)
	}
}
