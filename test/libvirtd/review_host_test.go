package libvirtd_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestReviewHostPinTransient: netctl hook pin on a transient domain (virsh
// create) must not make it persistent: virDomainDefineXML of a running
// transient domain's UUID turns it into a persistent one, something the
// operator did not ask for (and its XML is the live one). Pin should refuse
// ("domain X is transient: it has no persistent definition to pin; ...")
// and leave the domain as it is.
func TestReviewHostPinTransient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	g, err := e.d.NewGuest(ctx, "trans", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Create(g, g.DomainXML(netctlMetadata, netctlIface(""))); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	info := mustVirsh(t, e.d, "dominfo", "trans")
	if !strings.Contains(info, "Persistent:     no") {
		t.Fatalf("the domain is not transient before the pin:\n%s", info)
	}
	out, err := e.netctl("hook", "pin", "trans")
	t.Logf("netctl hook pin trans: %v\n%s", err, out)
	if info := mustVirsh(t, e.d, "dominfo", "trans"); !strings.Contains(info, "Persistent:     no") {
		t.Errorf("netctl hook pin made the transient domain persistent:\n%s", info)
	}
	e.d.Virsh("destroy", "trans")
	e.d.Virsh("undefine", "trans")
}
