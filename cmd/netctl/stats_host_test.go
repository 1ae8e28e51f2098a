package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostStatsHungVM: netctl stats on a VM whose monitor greets but
// never answers a command ends (exit 1) saying QEMU did not answer,
// within its sample deadline, instead of waiting for ever.
func TestHostStatsHungVM(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	hung := qemutest.HungQMP(t)
	// A deadlock guard, not a timing bound: the sample's own deadline is
	// a few seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "stats", "--qmp", hung)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("netctl stats --qmp (a hung monitor) did not end:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "did not answer in time") {
		t.Errorf("netctl stats --qmp (a hung monitor): %v\n%s", err, out)
	}
	t.Logf("netctl stats --qmp (a hung monitor): %s", strings.TrimSpace(string(out)))
}
