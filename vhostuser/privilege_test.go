package vhostuser

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
)

const nobody = 65534

// TestBridgeHelperProcess is the child of TestHostDropPrivileges and of
// TestVMBridge's "privileges dropped": as root, it makes a tap and a
// bridge (on a fake kernel, or on /dev/vhost-net), drops to nobody, and
// checks that the bridge still serves while the process can no longer do
// what needs privilege.
func TestBridgeHelperProcess(t *testing.T) {
	mode := os.Getenv("NETCTL_VU_HELPER")
	if mode == "" {
		t.Skip("runs only as the child of TestHostDropPrivileges and TestVMBridge")
	}
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vupriv%d", VnetHdr: true, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	cfg := Config{Socket: "/run/vu-priv.sock", Backend: tap, Queues: 2, Owner: &Owner{UID: nobody, GID: nobody},
		Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6}
	if mode == "fake" {
		cfg.OpenVhost = newFakeKernel().open
	}
	// Private /run: testenv.Host made a mount namespace.
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	r := startBridgeWith(t, cfg)
	var st unix.Stat_t
	if err := unix.Stat(cfg.Socket, &st); err != nil || st.Uid != nobody || st.Mode&0o777 != 0o600 {
		t.Fatalf("socket %v: uid %d mode %#o, want nobody and 0600", err, st.Uid, st.Mode&0o777)
	}
	var h *hostside.Side
	if mode == "vhost-net" {
		h = newHostSide(t, tap.Name()) // link up and a packet socket: privileged, so before the drop
	}
	if mode == "vhost-net" {
		// In the VM only (a machine-wide sysctl): with suid_dumpable 1 the
		// kernel leaves a process that changed uid dumpable, so the
		// front-end's VMM, running as the same user, could ptrace the
		// bridge or open its fds through /proc.
		old, err := os.ReadFile("/proc/sys/fs/suid_dumpable")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("/proc/sys/fs/suid_dumpable", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile("/proc/sys/fs/suid_dumpable", old, 0)
	}
	note, err := DropPrivileges(nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(note)
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable %d (%v) after the drop: the owner's processes could ptrace the bridge", d, err)
	}
	// What needs privilege now fails: a new tap, a link change.
	if _, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vudenied%d", VnetHdr: true}); err == nil {
		t.Error("a new tap could still be created after the drop")
	}
	if err := macvtap.SetLinkMTU(tap.Name(), 1400); err == nil {
		t.Error("the tap's MTU could still be changed after the drop")
	}
	// The bridge still serves: a full handshake sets the tap's header and
	// offloads and, on vhost-net, SET_OWNER runs unprivileged.
	f := dialFrontend(t, cfg.Socket)
	f.handshake(2)
	if hdr, _ := tap.VnetHdrSize(); hdr != 12 {
		t.Errorf("tap header %d after the handshake, want 12", hdr)
	}
	if o := tap.Offloads(); o != macvtap.OffloadCSUM|macvtap.OffloadTSO4 {
		t.Errorf("tap offloads %v after the handshake", o)
	}
	f.c.Close()
	r.waitIdle(t, 1)
	if mode == "vhost-net" {
		g := dialDataPath(t, cfg.Socket, 2)
		framesBothWays(t, g, h, 7)
		g.c.Close()
		r.waitIdle(t, 2)
	}
	if err := r.stop(); err != nil && !errors.Is(err, os.ErrPermission) {
		t.Error(err)
	}
}

// TestHostDropPrivileges runs the helper with a fake vhost-net and a
// real tap on this host.
func TestHostDropPrivileges(t *testing.T) {
	testenv.Host(t)
	out, err := helper(t, "fake")
	if err != nil {
		t.Fatalf("the helper failed: %v\n%s", err, out)
	}
	t.Logf("helper:\n%s", out)
}
