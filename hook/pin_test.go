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
