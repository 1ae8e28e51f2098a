package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

func TestPlanAcrossTheVMKernels(t *testing.T) {
	p, err := Plan([]*host.Description{load(t, "probe-6.1.json"), load(t, "probe-6.12.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Hosts, []string{"vm-6-1", "vm-6-12"}) || p.Backends["vm-6-1"] != BackendVhostNet {
		t.Errorf("hosts %v, backends %v", p.Hosts, p.Backends)
	}
	if slices.Contains(p.Offer, "GUEST_USO4") || slices.Contains(p.Offer, "RING_RESET") || !slices.Contains(p.Offer, "GUEST_TSO4") {
		t.Errorf("plan offers %v", p.Offer)
	}
	found := false
	for _, d := range p.Differences {
		if d.Feature == "GUEST_USO4" {
			found = true
			if _, ok := d.Missing["vm-6-12"]; ok || !strings.Contains(d.Missing["vm-6-1"], "Linux 6.2") {
				t.Errorf("USO difference %+v", d)
			}
		}
	}
	// Every dropped bit, ring features included, is a property.
	want := map[string]string{"guest_uso4": "off", "guest_uso6": "off", "host_uso": "off", "queue_reset": "off"}
	if !found || len(p.QEMU) != len(want) {
		t.Errorf("differences %+v, qemu %v", p.Differences, p.QEMU)
	}
	for k, v := range want {
		if p.QEMU[k] != v {
			t.Errorf("property %s=%q, want %s", k, p.QEMU[k], v)
		}
	}
}

func TestPlanRefusesBadHostSets(t *testing.T) {
	a := load(t, "probe-6.12.json")
	for _, c := range []struct {
		hosts []*host.Description
		want  string
	}{
		{nil, "no hosts"},
		{[]*host.Description{a, load(t, "probe-6.12.json")}, "two probes of host vm-6-12"},
		{[]*host.Description{a, nil}, "host 1 has no description"},
		{[]*host.Description{a, {Schema: host.Schema, Kernel: "6.1"}}, "no \"hostname\" field"},
	} {
		if _, err := Plan(c.hosts, Request{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d hosts: %v, want %q", len(c.hosts), err, c.want)
		}
	}
}

// TestPlanClosesTheIntersection: each host's offer is closed, but their
// intersection need not be: GUEST_ECN with GUEST_TSO4 only on one host and
// GUEST_TSO6 only on the other.
func TestPlanClosesTheIntersection(t *testing.T) {
	a, b := load(t, "probe-6.12.json"), load(t, "probe-6.1.json")
	a.Tap.Offloads = []string{"csum", "tso4", "tso_ecn"}
	b.Tap.Offloads = []string{"csum", "tso6", "tso_ecn"}
	p, err := Plan([]*host.Description{a, b}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	var offer virtio.Features
	for _, n := range p.Offer {
		f, _ := virtio.ParseFeature(n)
		offer |= f
	}
	if Unmet(offer) != 0 || offer.Has(virtio.NetGuestECN) || p.QEMU["guest_ecn"] != "off" {
		t.Errorf("offer %v, properties %v", offer, p.QEMU)
	}
	i := slices.IndexFunc(p.Differences, func(d Difference) bool { return d.Feature == "GUEST_ECN" })
	if i < 0 || len(p.Differences[i].Missing) != 0 || !strings.Contains(p.Differences[i].Reason, "not offered on every host") {
		t.Errorf("differences %+v", p.Differences)
	}
}

// TestPlanMixedQEMU: a property only some hosts' QEMU has is set on those
// hosts only, and named as missing on the others.
func TestPlanMixedQEMU(t *testing.T) {
	old, new := load(t, "probe-host-root.json"), load(t, "probe-6.1.json") // QEMU 7.2.22; no QEMU in the probe
	p, err := Plan([]*host.Description{old, new}, Request{QEMU: "8.2.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, set := p.QEMU["guest_uso4"]; set || p.QEMUByHost["vm-6-1"]["guest_uso4"] != "off" ||
		!strings.Contains(p.Unavailable["guest_uso4"], "not on vm (QEMU 7.2.22 has no guest_uso4 property") {
		t.Errorf("properties %v, by host %v, unavailable %v", p.QEMU, p.QEMUByHost, p.Unavailable)
	}
	if p.Backends["vm"] != BackendUserspace || p.QEMU["queue_reset"] != "off" {
		t.Errorf("backends %v, properties %v", p.Backends, p.QEMU)
	}
}

// TestPlanRefusesABadRequestOnce: a bad request (profile, QEMU version,
// queues) is the request's fault, not a host's: the error names no host.
func TestPlanRefusesABadRequestOnce(t *testing.T) {
	hosts := []*host.Description{load(t, "probe-6.1.json"), load(t, "probe-6.12.json")}
	for _, req := range []Request{{Profile: "bogus"}, {QEMU: "8"}, {Queues: MaxQueues + 1}, {Backend: "dpdk"}} {
		_, err := Plan(hosts, req)
		if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "host ") {
			t.Errorf("%+v: %v; want ErrInvalid naming no host", req, err)
		}
	}
}

// TestPlanDropsWhatNoHostOffers: a managed bit that no host offers (USO
// on a single 6.1 host, ECN and UFO on every host under the compat
// profile) still gets its property, and now its Difference too: missing
// on every host, each with that host's reason. Before, the property was
// emitted with no word on why.
func TestPlanDropsWhatNoHostOffers(t *testing.T) {
	p, err := Plan([]*host.Description{load(t, "probe-6.1.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	diff := map[string]Difference{}
	for _, d := range p.Differences {
		diff[d.Feature] = d
	}
	for _, f := range []string{"GUEST_USO4", "GUEST_USO6", "HOST_USO", "RING_RESET"} {
		if why := diff[f].Missing["vm-6-1"]; why == "" || why == "not offered" {
			t.Errorf("%s: difference %+v, want it missing on vm-6-1 with the host's reason", f, diff[f])
		}
	}
	if !strings.Contains(diff["GUEST_USO4"].Missing["vm-6-1"], "Linux 6.2") || p.QEMU["guest_uso4"] != "off" {
		t.Errorf("GUEST_USO4: %+v, property %q", diff["GUEST_USO4"], p.QEMU["guest_uso4"])
	}
	p, err = Plan([]*host.Description{load(t, "probe-6.1.json"), load(t, "probe-6.12.json")}, Request{Profile: Compat})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range p.Differences {
		if d.Feature == "GUEST_ECN" {
			found = true
			if len(d.Missing) != 2 || !strings.Contains(d.Missing["vm-6-12"], "compat profile") {
				t.Errorf("compat GUEST_ECN: %+v", d)
			}
		}
	}
	if !found || p.QEMU["guest_ecn"] != "off" {
		t.Errorf("compat: differences %+v, properties %v", p.Differences, p.QEMU)
	}
}
