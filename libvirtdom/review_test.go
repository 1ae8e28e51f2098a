package libvirtdom

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/policy"
)

// TestReviewPinKeepsDriverAttrsLibvirtxmlLacks: Pin rewrites a <driver>
// by re-marshalling libvirtxml's struct of it (DriverFor starts from the
// parsed old driver), so an attribute or child of <driver> that this
// libvirtxml does not know (one a newer libvirtd than the bindings writes)
// is silently dropped from the persistent definition. Pin should keep
// what it does not decide, or refuse such an interface and say why.
func TestReviewPinKeepsDriverAttrsLibvirtxmlLacks(t *testing.T) {
	in := `<domain type='kvm'>
  <name>d</name>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:78:01:02'/>
      <target dev='nctl0' managed='no'/>
      <model type='virtio'/>
      <driver name='vhost' queues='2' futureknob='7'>
        <host csum='off' futurehost='x'/>
        <future-child level='3'/>
      </driver>
    </interface>
  </devices>
</domain>
`
	d := decision(t, policy.BackendUserspace, "")
	out, changes, err := Pin([]byte(in), func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		return DriverFor(x.Driver, d, 0).Driver
	})
	if err != nil {
		// Refusing (and naming what would be lost) is as good as keeping it.
		if !strings.Contains(err.Error(), "futureknob") {
			t.Fatalf("Pin's refusal does not name what a pin would drop: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	if len(changes) != 1 {
		t.Fatalf("%d changes, want 1", len(changes))
	}
	for _, want := range []string{"futureknob", "futurehost", "future-child"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Pin dropped %s from the interface's <driver>:\n%s", want, out)
		}
	}
}
