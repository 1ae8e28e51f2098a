package hook

import (
	"context"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
)

// TestDecideMakesNothing: Decide gives prepare's decisions for the
// domain's managed interfaces (vhost-net for the tap whose metadata asks
// for it, the chain for the direct one, vdpa skipped with its reason),
// and touches no device, record or log line.
func TestDecideMakesNothing(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	p, ds, err := h.Decide(context.Background(), allXML(t, vd))
	if err != nil {
		t.Fatal(err)
	}
	if p.Domain != "netctl-all" || len(ds) != 3 {
		t.Fatalf("plan %+v, %d decisions", p, len(ds))
	}
	if ds[0].Interface.Kind != KindTap || ds[0].Decision.Backend != policy.BackendVhostNet || ds[0].Skip != "" {
		t.Errorf("tap: %+v", ds[0])
	}
	if ds[1].Interface.Kind != KindVDPA || !strings.Contains(ds[1].Skip, "vdpa") {
		t.Errorf("vdpa: %+v", ds[1])
	}
	if ds[2].Interface.Kind != KindDirect || ds[2].Decision.Backend == "" {
		t.Errorf("direct: %+v", ds[2])
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("devices after Decide: %s", got)
	}
	if strings.Join(f.calls, " ") != "probe" {
		t.Errorf("Decide called %v, want only the probe", f.calls)
	}
	if recs, _, _ := h.Store.ListDomains(); len(recs) != 0 || log.Len() != 0 {
		t.Errorf("Decide left %d records and log %q", len(recs), log.String())
	}
	// A domain netctl manages nothing in: no probe, no decision.
	f.calls = nil
	p, ds, err = h.Decide(context.Background(), sample(t, "net-vdpa.xml"))
	if err != nil || len(ds) != 0 || len(f.calls) != 0 {
		t.Errorf("net-vdpa.xml: %v, %v, calls %v", err, ds, f.calls)
	}
}

// TestDecideForLibvirtsQEMU: Decide decides for Hook.QEMUVersion (the
// QEMU libvirt starts the domain with, which hook pin asks libvirt for)
// over the probe's: on a 6.12 host whose probe found no QEMU in PATH, a
// plan of 6.1 and 6.12 hosts leaves out USO, given as host_uso=off and
// guest_uso4/6=off as QEMU 8.2 knows them; for libvirt's QEMU 7.2, which
// has none of those properties (and so offers no USO), none is set.
func TestDecideForLibvirtsQEMU(t *testing.T) {
	plan, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	h, _, _ := migrateHook(t, probeOf(t, "probe-6.12.json", ""), plan)
	xml := allXML(t, h.Config.VDPADir)
	_, ds, err := h.Decide(context.Background(), xml)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Decision.QEMU["host_uso"] != "off" {
		t.Fatalf("no QEMU known: the decision's properties %v, want host_uso=off as QEMU 8.2 knows it", ds[0].Decision.QEMU)
	}
	h.QEMUVersion = "7.2.0"
	_, ds, err = h.Decide(context.Background(), xml)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"host_uso", "guest_uso4", "guest_uso6"} {
		if v, ok := ds[0].Decision.QEMU[p]; ok {
			t.Errorf("for libvirt's QEMU 7.2: %s=%s, a property that QEMU lacks", p, v)
		}
	}
	if ds[0].Decision.QEMU["queue_reset"] != "off" || ds[0].Decision.QEMUVersion != "7.2.0" {
		t.Errorf("for libvirt's QEMU 7.2: properties %v, version %q: want queue_reset=off for 7.2.0", ds[0].Decision.QEMU, ds[0].Decision.QEMUVersion)
	}
}
