package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// planOf is the plan of the two VM kernels as netctl plan -j writes it,
// read back as attach --plan reads it.
func planOf(t testing.TB) (PlanResult, *Pool) {
	t.Helper()
	p, err := Plan([]*host.Description{load(t, "probe-6.1.json"), load(t, "probe-6.12.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := ParsePlanFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return p, pool
}

// TestPoolPinsTheNewHost: on 6.12, a VM of the 6.1+6.12 pool is not
// offered USO or RING_RESET (6.1's vhost-net and tun carry neither), and
// the properties that keep QEMU from offering them are set: the field's
// migration failure (RING_RESET negotiated on 6.12, refused by 6.1) cannot
// happen.
func TestPoolPinsTheNewHost(t *testing.T) {
	plan, pool := planOf(t)
	if pool.ID != plan.ID || pool.ID != FeatureSetID(pool.Offer) || !strings.HasPrefix(pool.ID, "fs-") {
		t.Fatalf("pool %+v, plan id %s", pool, plan.ID)
	}
	h := load(t, "probe-6.12.json")
	free, err := Decide(h, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !free.Offer.Has(virtio.RingReset) {
		t.Fatalf("6.12 without a pool offers %v: the test needs RING_RESET there", free.OfferNames)
	}
	req := Request{Pool: pool}
	d, err := Decide(h, req)
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, req)
	if d.Offer&managedMask&^pool.Offer != 0 {
		t.Errorf("offer %v outside the pool %v", d.Offer, pool.Offer)
	}
	if d.QEMU["queue_reset"] != "off" || !strings.Contains(d.Dropped["RING_RESET"], pool.ID) {
		t.Errorf("qemu %v, dropped %q", d.QEMU, d.Dropped["RING_RESET"])
	}
	for _, n := range d.Notes {
		if strings.Contains(n, "cannot carry") {
			t.Errorf("6.12 carries the whole plan, yet: %s", n)
		}
	}
	// 6.1 under the same pool offers what it offered alone.
	old := load(t, "probe-6.1.json")
	a, _ := Decide(old, Request{})
	b, err := Decide(old, Request{Pool: pool})
	if err != nil || a.Offer != b.Offer {
		t.Errorf("6.1 offers %v alone, %v in the pool (%v)", a.OfferNames, b.OfferNames, err)
	}
}

// TestPoolNotesWhatThisHostLacks: a host that cannot carry the plan's set
// (a 6.1 host under a plan of 6.12 hosts only) is told so, by bit and why.
func TestPoolNotesWhatThisHostLacks(t *testing.T) {
	p, err := Plan([]*host.Description{load(t, "probe-6.12.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	pool, err := ParsePlanFile(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decide(load(t, "probe-6.1.json"), Request{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	var note string
	for _, n := range d.Notes {
		if strings.Contains(n, "cannot carry all of the pool's plan "+pool.ID) {
			note = n
		}
	}
	if !strings.Contains(note, "RING_RESET") || !strings.Contains(note, "cannot migrate here") {
		t.Errorf("notes %q", d.Notes)
	}
	// Insisting on a bit the pool leaves out is refused with the pool's
	// reason.
	p2, pool2 := planOf(t)
	_ = p2
	if _, err := Decide(load(t, "probe-6.12.json"), Request{Pool: pool2, Enable: virtio.RingReset}); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), pool2.ID) {
		t.Errorf("RING_RESET forced on in the pool: %v", err)
	}
}

// TestPlanSaysItInLibvirtXML: the pin as libvirt's <driver> attributes
// and, for what <driver> has no attribute for, <qemu:override>.
func TestPlanSaysItInLibvirtXML(t *testing.T) {
	plan, _ := planOf(t)
	if plan.Libvirt.Driver != "<driver/>" {
		t.Errorf("driver %q: the 6.1+6.12 plan drops only USO and RING_RESET, which <driver> cannot say", plan.Libvirt.Driver)
	}
	if plan.Libvirt.Override["queue_reset"] != "off" || plan.Libvirt.Override["host_uso"] != "off" ||
		!strings.Contains(plan.Libvirt.OverrideXML, "<qemu:property name='queue_reset' type='bool' value='false'/>") {
		t.Errorf("override %v %q", plan.Libvirt.Override, plan.Libvirt.OverrideXML)
	}
	// The compat profile drops offloads <driver> can say.
	c, err := Plan([]*host.Description{load(t, "probe-6.1.json"), load(t, "probe-6.12.json")}, Request{Profile: Compat})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Libvirt.Driver, "<host ecn='off' ufo='off'/>") || !strings.Contains(c.Libvirt.Driver, "<guest ecn='off' ufo='off'/>") {
		t.Errorf("compat driver %q", c.Libvirt.Driver)
	}
}

func TestParsePlanFileRefuses(t *testing.T) {
	plan, _ := planOf(t)
	good, _ := json.Marshal(plan)
	edit := func(f func(*PlanResult)) []byte {
		p := plan
		p.Offer = append([]string(nil), plan.Offer...)
		f(&p)
		b, _ := json.Marshal(p)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a plan"},
		{"probe", []byte(`{"schema":1,"hostname":"a"}`), "no hosts or no offer"},
		{"two", append(append([]byte{}, good...), good...), "more after it"},
		{"unknown bit", edit(func(p *PlanResult) { p.Offer = append(p.Offer, "WARP_DRIVE") }), "no virtio feature"},
		{"stale id", edit(func(p *PlanResult) { p.Offer = append(p.Offer, "RING_RESET") }), "was edited"},
		{"bad host", edit(func(p *PlanResult) { p.Hosts = []string{"a b"} }), "no hostname"},
		{"huge", make([]byte, MaxPlanFile+1), "more than"},
	} {
		if _, err := ParsePlanFile(c.b); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzParsePlanFile(f *testing.F) {
	plan, _ := planOf(f)
	b, _ := json.Marshal(plan)
	f.Add(b)
	f.Add([]byte(`{"hosts":["a"],"offer":["CSUM"],"id":"fs-1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlanFile(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if p.ID != FeatureSetID(p.Offer) || len(p.Hosts) == 0 {
			t.Fatalf("pool %+v", p)
		}
	})
}
