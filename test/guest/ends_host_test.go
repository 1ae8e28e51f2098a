package guest

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
)

// TestHostGuestEnds: a paused guest that never ran is killed by Close
// (its QEMU is gone, its directory removed, no error), and a guest whose
// QEMU quits under it makes Exec and Close say so instead of hanging.
func TestHostGuestEnds(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	g, err := Boot(ctx, Options{Paused: true})
	if err != nil {
		t.Fatal(err)
	}
	pid := qemuPID(ctx, t, g)
	dir := g.Dir()
	if err := g.Close(); err != nil {
		t.Errorf("Close of a paused guest: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("QEMU %d still runs after Close", pid)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s left after Close", dir)
	}

	g, err = Boot(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := qmp.Dial(ctx, g.QMP())
	if err != nil {
		t.Fatal(err)
	}
	c.Execute(ctx, "quit", nil)
	c.Close()
	_, _, err = g.Exec(ctx, "sleep 600")
	if err == nil || !strings.Contains(err.Error(), "the guest ended") {
		t.Errorf("Exec on a guest whose QEMU quit: %v", err)
	}
	if err := g.Close(); err == nil {
		t.Error("Close of a guest that never reported its status: no error")
	} else {
		t.Logf("Close: %.200s", err)
	}
}

// qemuPID asks QEMU for its pid (SO_PEERCRED on the QMP socket).
func qemuPID(ctx context.Context, t *testing.T, g *Guest) int {
	t.Helper()
	c := dialQMP(ctx, t, g)
	defer c.Close()
	pid, err := c.PeerPID()
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
