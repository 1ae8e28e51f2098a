package probe

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
)

// TestProbeVDPAMigration: netctl probe (Full) answers for each vdpa device
// whether the host's QEMU can migrate it, from what its vhost-vdpa node
// says and the QEMU version found; a device that was not looked at (in
// use) says why. Attach's probe and Probe (netctl diagnose) leave the
// field out and open no device.
func TestProbeVDPAMigration(t *testing.T) {
	src := fake()
	src.vdpa = func(v *host.VDPA) {
		v.Available = true
		v.Devices = []host.VDPADevice{{Name: "free0", Driver: "vhost_vdpa"}, {Name: "held0", Driver: "vhost_vdpa"}}
	}
	var looked []string
	src.vdpaFacts = func(d host.VDPADevice) (*host.VDPAFacts, string) {
		looked = append(looked, d.Name)
		if d.Name == "held0" {
			return nil, "unknown: in use by pid 7 (qemu-system-x86)"
		}
		return &host.VDPAFacts{BackendFeatures: "0xe", Features: "0x320018028", VQs: 2, Groups: 1, AddressSpaces: 1}, ""
	}
	r, err := probe(nil, src, Full)
	if err != nil {
		t.Fatal(err)
	}
	free, held := r.VDPA.Devices[0].Migration, r.VDPA.Devices[1].Migration
	if free == nil || !free.OK || free.Facts == nil || !strings.Contains(free.Reason, "no VHOST_BACKEND_F_SUSPEND") {
		t.Errorf("free0 with QEMU 8.2.2: %+v", free)
	}
	if held == nil || held.OK || held.Facts != nil || held.Reason != "unknown: in use by pid 7 (qemu-system-x86)" {
		t.Errorf("held0: %+v", held)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	src.qemu = func(q *host.QEMU) { q.Version = "7.2.22" }
	r, _ = probe(nil, src, Full)
	if m := r.VDPA.Devices[0].Migration; m == nil || m.OK || !strings.Contains(m.Reason, "x-svq=on") {
		t.Errorf("free0 with QEMU 7.2.22: %+v", m)
	}
	for _, p := range []Parts{{}, All} { // attach's, and Probe's (netctl diagnose, beside a running VM)
		looked = nil
		r, _ = probe(nil, src, p)
		if len(looked) != 0 || r.VDPA.Devices[0].Migration != nil {
			t.Errorf("%+v looked at %v: %+v", p, looked, r.VDPA.Devices[0].Migration)
		}
	}
}
