package libvirtattach

import (
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/test/pool"
)

// TestHotplugKeepsPlan: on the 6.12 VM's probe with QEMU 7.2, the plan
// of the 6.1 and 6.12 VMs leaves RING_RESET out, which only
// queue_reset=off (a <qemu:override>) turns off: a hotplug onto a
// pc-q35-7.2 domain is refused with what to do; a pc-q35-7.1 machine
// turns it off itself (hw_compat_7_1), and without a plan nothing is
// asked.
func TestHotplugKeepsPlan(t *testing.T) {
	h := pool.Probe(t, "probe-6.12.json")
	p := pool.VMKernels(t)
	dec, err := policy.Decide(h, policy.Request{Backend: policy.BackendVhostNet, QEMU: "7.2.0", Pool: p})
	if err != nil {
		t.Fatal(err)
	}
	if dec.QEMU["queue_reset"] != "off" {
		t.Fatalf("the decision's QEMU properties %v: want queue_reset=off", dec.QEMU)
	}
	dom := func(machine string) *libvirtxml.Domain {
		return &libvirtxml.Domain{OS: &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Machine: machine}}}
	}
	err = hotplugKeepsPlan(dec, dom("pc-q35-7.2"), p)
	if !errors.Is(err, errs.ErrNotAvailable) || !strings.Contains(err.Error(), "queue_reset=off") || !strings.Contains(err.Error(), "netctl hook pin") {
		t.Errorf("pc-q35-7.2: %v", err)
	}
	if err := hotplugKeepsPlan(dec, dom("pc-q35-7.1"), p); err != nil {
		t.Errorf("pc-q35-7.1 turns queue_reset off itself: %v", err)
	}
	if err := hotplugKeepsPlan(dec, dom("pc-q35-7.2"), nil); err != nil {
		t.Errorf("no plan: %v", err)
	}
	if err := hotplugKeepsPlan(dec, &libvirtxml.Domain{}, p); err == nil {
		t.Errorf("a domain without <os>: want the refusal")
	}
}
