package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
)

// TestPlanSaysVDPAMigration: netctl plan on the 6.12 VM with a VDUSE
// device (vDPA chosen there) and the 6.1 VM says that the vdpa device
// cannot live-migrate on the first, and why: with --qemu 7.2.22 (Debian
// 12's), because QEMU 7.2 needs x-svq=on; -j has it per host.
func TestPlanSaysVDPAMigration(t *testing.T) {
	out := run(t, "plan", "--qemu", "7.2.22", testdata+"probe-6.12-vdpa.json", testdata+"probe-6.1.json")
	want := "note: vm-6-12-vdpa: vdpa device probevdpa0 cannot live-migrate: QEMU 7.2.22 migrates vhost-vdpa only with the experimental netdev option x-svq=on"
	if !strings.Contains(out, want) || strings.Contains(out, "note: vm-6-1: vdpa") {
		t.Errorf("plan output lacks %q (or notes vm-6-1):\n%s", want, out)
	}
	var p policy.PlanResult
	if err := json.Unmarshal([]byte(run(t, "plan", "-j", testdata+"probe-6.12-vdpa.json", testdata+"probe-6.1.json")), &p); err != nil {
		t.Fatal(err)
	}
	if why := p.VDPAMigration["vm-6-12-vdpa"]; !strings.Contains(why, "no QEMU on this host") || len(p.VDPAMigration) != 1 {
		t.Errorf("plan -j vdpa_migration %v", p.VDPAMigration)
	}
}
