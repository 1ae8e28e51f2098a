package diagnose

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// requirementOf is f's entry in policy.Requirements, or false.
func requirementOf(f virtio.Features) (policy.Requirement, bool) {
	for _, r := range policy.Requirements {
		if r.F == f {
			return r, true
		}
	}
	return policy.Requirement{}, false
}

// chainOf returns the bits between f and its roots (f's prerequisites,
// theirs, ...; f included) and the roots: the prerequisites that have
// none of their own.
func chainOf(f virtio.Features) (between, roots virtio.Features) {
	between = f
	req, ok := requirementOf(f)
	if !ok {
		return 0, f
	}
	for _, b := range req.AnyOf.Bits() {
		bw, r := chainOf(virtio.Bit(b))
		between, roots = between|bw, roots|r
	}
	return between, roots
}

// TestExplainEveryDependencyChain follows every chain of policy.Requirements
// to its first cause (issue 11, defect 3): the roots are set off by their
// NIC property, everything between them and the bit is offered and
// acknowledged, and each bit on the way is off with layer "dependency"
// and a reason that names every root's property. GUEST_ECN's chain is
// GUEST_CSUM -> GUEST_TSO4/GUEST_TSO6 -> GUEST_ECN, CTRL_RX_EXTRA's is
// CTRL_VQ -> CTRL_RX -> CTRL_RX_EXTRA.
func TestExplainEveryDependencyChain(t *testing.T) {
	deep := 0
	for _, req := range policy.Requirements {
		name := virtio.BitName(req.F.Bits()[0])
		between, roots := chainOf(req.F)
		if between&^req.F != 0 {
			deep++
		}
		t.Run(name, func(t *testing.T) {
			offer := virtio.Version1 | between
			s := tapSnapshot(t, offer, offer, "6.12", "csum", "tso4", "tso6", "tso_ecn", "uso4", "uso6")
			var props []string
			for _, b := range roots.Bits() {
				p := propOf(virtio.Bit(b))
				if p == "" {
					t.Fatalf("%s has no NIC property", virtio.BitName(b))
				}
				s.Props[p] = false
				props = append(props, p+"=off")
			}
			r, err := Explain(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range between.Bits() {
				got := row(t, r, virtio.BitName(b))
				if got.Verdict != "off" || got.Layer != "dependency" || !strings.HasPrefix(got.Reason, "needs ") {
					t.Errorf("%s: %+v, want off, layer dependency, \"needs ...\"", got.Feature, got)
				}
				for _, p := range props {
					if !strings.Contains(got.Reason, p) {
						t.Errorf("%s: reason %q does not name the first cause %s", got.Feature, got.Reason, p)
					}
				}
			}
			for _, b := range roots.Bits() {
				if got := row(t, r, virtio.BitName(b)); got.Verdict != "off" || got.Layer != "property" {
					t.Errorf("root %s: %+v, want off by its property", got.Feature, got)
				}
			}
		})
	}
	if deep < 4 { // GUEST_ECN, HOST_ECN, RSC_EXT, CTRL_RX_EXTRA
		t.Errorf("only %d requirements have a chain longer than one step", deep)
	}
}

// TestExplainVhostRefusalReadBack models QEMU's read-back after a vhost-net
// refusal for every ring bit QEMU offers by default and lets vhost-net veto
// (hw/net/vhost_net.c kernel_feature_bits): QEMU clears the bit from its
// offer, and for the common virtio properties (event_idx, indirect_desc,
// notify_on_empty, queue_reset: VirtIODevice.host_features) the property
// then reads off with nothing on the command line; mrg_rxbuf lives in
// VirtIONet's own word and keeps reading on. Either way the row blames
// vhost-net, not the property (issue 11, defect 1), and a bit the user set
// off blames the command line.
func TestExplainVhostRefusalReadBack(t *testing.T) {
	readBack := map[virtio.Features]bool{virtio.EventIdx: true, virtio.IndirectDesc: true, virtio.NotifyOnEmpty: true, virtio.RingReset: true}
	refusable := qemuDefaultOn & vhostKernelBits
	if refusable.Bits() == nil || !refusable.Has(virtio.RingReset|virtio.EventIdx|virtio.NetMrgRxbuf) {
		t.Fatalf("refusable %v", refusable)
	}
	for _, b := range refusable.Bits() {
		f := virtio.Bit(b)
		name, prop := virtio.BitName(b), propOf(f)
		for _, setOff := range []bool{false, true} {
			if setOff && prop == "" {
				continue // VERSION_1: no property (disable-modern)
			}
			t.Run(name+map[bool]string{false: "/refused", true: "/refused_and_set_off"}[setOff], func(t *testing.T) {
				all := linuxGuest | virtio.IndirectDesc | virtio.NotifyOnEmpty | virtio.RingReset
				offer := all &^ f
				guest := offer &^ virtio.NotifyOnEmpty
				kernel := vhostNet612 &^ f
				s := tapSnapshot(t, offer, guest, "6.1", "csum", "tso4", "tso6", "tso_ecn")
				s.Status = withVhost(t, s.Status, kernel, guest&vhostKernelBits&kernel)
				s.Driver, s.Defaults, s.Cmdline = "virtio-net-pci", defaults(t), map[string]string{}
				if readBack[f] {
					s.Props[prop] = false
				}
				if setOff {
					s.Cmdline[prop] = "off"
				}
				r, err := Explain(s)
				if err != nil {
					t.Fatal(err)
				}
				got := row(t, r, name)
				want, layer := "vhost-net on 6.1 does not offer it, so QEMU does not either", "vhost-net"
				if readBack[f] {
					want += " (QEMU writes that back: the NIC's property " + prop + " reads off)"
				}
				if setOff {
					want, layer = "set off on QEMU's command line (-device virtio-net-pci,...,"+prop+"=off)", "cmdline"
				}
				if got.Verdict != "off" || got.Offered || got.Layer != layer || got.Reason != want {
					t.Errorf("%+v\nwant off, layer %s, %q", got, layer, want)
				}
			})
		}
	}
}
