package attach

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// dyingHost is the real host, except that QEMU is killed right after the
// tap is made, before any fd is passed.
type dyingHost struct {
	RealHost
	qemu *exec.Cmd
}

func (h dyingHost) OpenTap(spec TapSpec) (Backend, error) {
	b, err := h.RealHost.OpenTap(spec)
	if err == nil {
		h.qemu.Process.Kill()
		h.qemu.Wait()
	}
	return b, err
}

// TestHostAttachQEMUDies: QEMU 7.2 is killed in the middle of an attach
// (after the tap, before getfd): attach fails naming the step, knows
// QEMU is gone (so it does not try to undo anything in it), and leaves no
// link, fd or record.
func TestHostAttachQEMUDies(t *testing.T) {
	testenv.Host(t)
	sock, cmd := qemutest.StartPaused(t, "dies")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	fds := testenv.OpenFDs(t)
	_, err := Attach(ctx, Request{QMP: sock, ID: "n1", Queues: 2, StateDir: dir, Host: dyingHost{qemu: cmd}})
	t.Logf("attach while QEMU dies: %v", err)
	if err == nil || !strings.Contains(err.Error(), "getfd") || strings.Contains(err.Error(), "rolling back failed") {
		t.Errorf("attach while QEMU dies: %v", err)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links left: %v", l)
	}
	// One fewer than before: os/exec's pidfd for QEMU, closed by Wait.
	if n := testenv.OpenFDs(t); n != fds-1 {
		t.Errorf("%d fds open, %d before (less QEMU's pidfd)", n, fds)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records left: %v", r)
	}
}
