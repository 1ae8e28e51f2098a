package policy

import (
	"os"
	"testing"

	"github.com/netctl/netctl/policy/host"
)

// load reads a host description saved from a real netctl probe -j: the
// 6.12 and 6.1 test VMs (vm-6-12, vm-6-1; vm-6-12-vdpa with a VDUSE device
// bound to vhost_vdpa) and this development machine as
// root and as nobody (host "vm": no vhost-net, tun with USO, QEMU 7.2.22).
func load(t testing.TB, name string) *host.Description {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkDecision asserts what holds for every decision: the offered set is
// closed under the spec's requirements, disabled features are not offered,
// and every managed feature left out has a QEMU property or a reason why
// the host's QEMU needs none.
func checkDecision(t testing.TB, d Decision, req Request) {
	t.Helper()
	if bad := Unmet(d.Offer); bad != 0 {
		t.Fatalf("offer %v is not closed: %v lack their requirements", d.Offer, bad)
	}
	if dis := d.Offer & req.Disable; dis != 0 {
		t.Fatalf("offered disabled features %v", dis)
	}
	if !d.Offer.Has(req.Enable) {
		t.Fatalf("offer %v lacks enabled %v without an error", d.Offer, req.Enable&^d.Offer)
	}
	for _, m := range managed {
		if d.Offer.Has(m.f) {
			if _, set := d.QEMU[m.prop]; set {
				t.Fatalf("%v offered but property %s=%s set", m.f, m.prop, d.QEMU[m.prop])
			}
			continue
		}
		_, unavailable := d.Unavailable[m.prop]
		if d.QEMU[m.prop] != m.value && !unavailable {
			t.Fatalf("%v not offered, but no %s=%s (properties %v)", m.f, m.prop, m.value, d.QEMU)
		}
		if d.Dropped[bitName(m.f)] == "" {
			t.Fatalf("%v not offered without a reason", m.f)
		}
	}
	if len(d.OfferNames) != len(d.Offer.Bits()) {
		t.Fatalf("offer names %v for %v", d.OfferNames, d.Offer)
	}
}
