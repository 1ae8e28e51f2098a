package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostGCUnitCaps runs netctl gc with exactly the capabilities
// deploy/systemd/netctl-gc.service gives it: beside a running QEMU whose
// QMP socket is another user's (0600), one whose QEMU died leaves a
// macvtap. Without CAP_NET_ADMIN gc cannot delete it and says so; without
// CAP_DAC_OVERRIDE it cannot ask the running QEMU whether it still has
// its NIC (it keeps it, saying why); with the unit's set it deletes the
// dead VM's macvtap and record, and asks the running QEMU and keeps its NIC.
func TestHostGCUnitCaps(t *testing.T) {
	testenv.Host(t)
	unit := filepath.Join(repoRoot, "deploy/systemd/netctl-gc.service")
	bounding := strings.Fields(unitSetting(t, unit, "CapabilityBoundingSet"))
	if ambient := strings.Fields(unitSetting(t, unit, "AmbientCapabilities")); strings.Join(ambient, " ") != strings.Join(bounding, " ") {
		t.Errorf("%s: AmbientCapabilities %v, CapabilityBoundingSet %v: they should be the same", unit, ambient, bounding)
	}
	bin := netctlBinary(t)
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("NETCTL_RUN_DIR", run)
	vethUp(t, "nvgcc0", "nvgcc1")
	deadSock, dead := qemutest.StartPaused(t, "gccdead")
	liveSock, _ := qemutest.StartPaused(t, "gcclive")
	mv := attachJSON(t, bin, "--qmp", deadSock, "--id", "mv1", "--macvtap", "nvgcc0")
	keep := attachJSON(t, bin, "--qmp", liveSock, "--id", "keep", "--macvtap", "nvgcc0")
	if mv.Macvtap == nil || !mv.Macvtap.Created || keep.Macvtap == nil {
		t.Fatalf("records %+v %+v", mv, keep)
	}
	kill(t, dead)
	if err := os.Chown(liveSock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(liveSock, 0o600); err != nil {
		t.Fatal(err)
	}
	without := func(c string) []string {
		var out []string
		for _, b := range bounding {
			if b != c {
				out = append(out, b)
			}
		}
		return out
	}
	gc := func(caps []string, args ...string) string {
		cmd := exec.Command(withCaps(t, bin, caps), append([]string{"gc"}, args...)...)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	// Without CAP_DAC_OVERRIDE: the running QEMU cannot be asked.
	if out := gc(without("CAP_DAC_OVERRIDE"), "--dry-run"); !strings.Contains(out, "keep on gcclive: kept (QEMU pid "+itoa(keep.QEMUPID)+" runs but could not be asked") ||
		!strings.Contains(out, "permission denied") {
		t.Errorf("gc without CAP_DAC_OVERRIDE: %s", out)
	}
	// Without CAP_NET_ADMIN: the macvtap cannot be deleted.
	out := gc(without("CAP_NET_ADMIN"))
	if !strings.Contains(out, "mv1 on gccdead: failed") || !linkThere(mv.Macvtap.Name, mv.Macvtap.Ifindex) {
		t.Errorf("gc without CAP_NET_ADMIN: %s", out)
	}
	t.Logf("without CAP_NET_ADMIN: %s", out)
	// The unit's set: everything gc is for.
	out = gc(bounding)
	for _, want := range []string{
		"mv1 on gccdead: removed: deleted macvtap " + mv.Macvtap.Name + ", removed the record",
		"keep on gcclive: kept (QEMU pid " + itoa(keep.QEMUPID) + " has device keep)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gc with the unit's capabilities %v: no %q in\n%s", bounding, want, out)
		}
	}
	if linkThere(mv.Macvtap.Name, mv.Macvtap.Ifindex) || !linkThere(keep.Macvtap.Name, keep.Macvtap.Ifindex) {
		t.Errorf("links after gc: %s", linkNames(t))
	}
}
