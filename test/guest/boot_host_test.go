package guest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostGuestBoot boots the guest, runs commands through the agent and
// powers it off: the output and exit status come back as they are, and
// Close leaves nothing.
func TestHostGuestBoot(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g, err := Boot(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t.Logf("boot: %v", g.BootTime())
	out, rc, err := g.Exec(ctx, "uname -r; echo to-stderr >&2; exit 7")
	if err != nil || rc != 7 || !strings.Contains(out, "6.12") || !strings.Contains(out, "to-stderr") {
		t.Fatalf("exec: %q, %d, %v", out, rc, err)
	}
	t0 := time.Now()
	const n = 10
	for i := 0; i < n; i++ {
		if out, rc, err := g.Exec(ctx, "echo $((6*7))"); err != nil || rc != 0 || strings.TrimSpace(out) != "42" {
			t.Fatalf("exec %d: %q, %d, %v", i, out, rc, err)
		}
	}
	t.Logf("exec round trip: %v", time.Since(t0)/n)
	if out, rc, err := g.Exec(ctx, "ls /sys/bus/pci/slots; grep -c . /proc/modules; ls /sys/module | grep -E 'acpiphp|pciehp|virtio_net'"); err != nil || rc != 0 {
		t.Errorf("%q %d %v", out, rc, err)
	} else {
		t.Logf("guest: %s", out)
	}
	dir := g.Dir()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Exec(ctx, "true"); err == nil {
		t.Error("exec after Close: no error")
	}
	if _, err := statErr(dir); err == nil {
		t.Errorf("%s left after Close", dir)
	}
}

func statErr(p string) (bool, error) { _, err := os.Stat(p); return err == nil, err }
