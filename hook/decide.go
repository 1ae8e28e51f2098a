package hook

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
)

// decide asks policy.Decide about one interface on the probed host: the
// metadata's backend preference (else <driver name>: vhost is vhost-net,
// qemu is userspace; else the chain), its profile, the features the
// domain forces on (Enable) and off (Disable), and its queue pairs. The
// backend is the interface's own: a tap's (vdpa is not a choice for it),
// a direct interface's macvtap (whose offloads the probe found on a
// scratch macvtap), or, for a vdpa interface, the device the hook just
// created (vdev, with its features). The QEMU version is the installed
// QEMU's when the probe found it: the hook cannot ask the QEMU libvirt is
// about to start. On a domain whose type (domType) is not 'kvm', vhost-net
// is not offered: libvirt would not open /dev/vhost-net for it
// (host.ForLibvirtDomain). pool is the host config's plan (Config.Pool;
// nil without one): nothing outside its set is offered, and forcing a bit
// outside it on is refused. Pure: it touches nothing.
//
// A refusal is one line naming the interface; a forced-on attribute the
// backend cannot carry is named as the domain XML spells it, with
// policy's reason and what to do, and wraps errs.ErrNotSupported. Other
// refusals (a backend not on this host, an unknown profile) are policy's
// own, wrapped.
func decide(desc *host.Description, domType string, it Interface, vdev *host.VDPADevice, pool *policy.Pool, iface string) (policy.Decision, error) {
	h := *desc
	noKVM := it.Kind != KindVDPA && h.ForLibvirtDomain(domType)
	req := policy.Request{Queues: max(it.Queues, 1), Profile: it.Profile, Backend: it.Backend,
		Enable: it.Force.On & policyBits, Disable: it.Force.Off & policyBits, Pool: pool}
	kind := "tun"
	switch it.Kind {
	case KindVDPA:
		req.Backend = policy.BackendVDPA
		h.VDPA = host.VDPA{Available: true, MgmtDevs: []string{it.Mgmtdev}}
		if vdev != nil {
			h.VDPA.Devices = []host.VDPADevice{*vdev}
		}
	default:
		if req.Backend == "" {
			switch it.Driver {
			case "vhost":
				// libvirt itself passes <driver name='vhost'> by on
				// a domain that is not type='kvm': so does the hook
				// (the chain decides, with the reason).
				if !noKVM {
					req.Backend = policy.BackendVhostNet
				}
			case "qemu":
				req.Backend = policy.BackendUserspace
			}
		}
		h.VDPA = host.VDPA{Error: "a type='" + libvirtType(it.Kind) + "' interface is a " + string(it.Kind) +
			", not a vdpa device: for vdpa use <interface type='vdpa'> with <source dev='/run/netctl/vdpa/NAME'/> and a management device in netctl's metadata"}
		if it.Kind == KindDirect {
			// libvirt makes a macvtap on the lower device: its
			// offloads are the macvtap's, which the probe found.
			kind = "macvtap"
			h.Tap = host.Tap{Available: desc.Macvtap.Available, Error: desc.Macvtap.Error, Offloads: slices.Clone(desc.Macvtap.Offloads)}
		}
	}
	d, err := policy.Decide(&h, req)
	if err != nil {
		if errors.Is(err, policy.ErrNotSupported) {
			if line := forcedRefusal(d, req.Enable, kind); line != "" {
				return d, fmt.Errorf("interface %s: %s: %s: %w", iface, line, hint(d.Backend), errs.ErrNotSupported)
			}
		}
		return d, fmt.Errorf("interface %s: %w", iface, err)
	}
	if it.Force.On.Has(virtio.NetGSO) {
		// GSO (deprecated by virtio, not managed by policy): a tap with
		// vnet_hdr takes any GSO frame the guest sends; a vdpa device
		// must offer it itself.
		var f virtio.Features
		if vdev != nil {
			f, _ = vdev.FeatureWord()
		}
		if d.Backend == policy.BackendVDPA && !f.Has(virtio.NetGSO) {
			return d, fmt.Errorf("interface %s: %s: vdpa device %s does not offer GSO: %s: %w",
				iface, attrOf(virtio.NetGSO, true), it.Name, hint(d.Backend), errs.ErrNotSupported)
		}
	}
	return d, nil
}

// forcedRefusal names each forced-on bit the decision dropped, with
// policy's reason ("<guest tso4='on'/> (GUEST_TSO4): tun on 6.1 refuses
// TUN_F_TSO4"); "" when none was.
func forcedRefusal(d policy.Decision, enable virtio.Features, kind string) string {
	var parts []string
	for _, b := range enable.Bits() {
		f := virtio.Bit(b)
		why, dropped := d.Dropped[virtio.BitName(b)]
		if !dropped {
			continue
		}
		if kind != "tun" {
			why = strings.ReplaceAll(why, "tun on ", kind+" on ")
		}
		parts = append(parts, fmt.Sprintf("%s (%s) cannot be honoured: %s", attrOf(f, true), bitName(f), why))
	}
	if len(parts) == 0 {
		return ""
	}
	return "<driver>" + strings.Join(parts, "; ") + " (backend " + d.Backend + ")"
}

// hint says what to do about a forced-on attribute the backend cannot
// carry.
func hint(backend string) string {
	if backend == policy.BackendVDPA {
		return "drop the attribute (or set it to 'off'), or create the device from a management device whose devices offer it (netctl vdpa mgmtdev show)"
	}
	return "drop the attribute (or set it to 'off') so the guest goes without it, or run the domain on a host whose kernel carries it"
}

func libvirtType(k Kind) string {
	switch k {
	case KindTap:
		return "ethernet"
	case KindDirect:
		return "direct"
	}
	return string(k)
}

// record is the decision as the domain record keeps it.
func record(it Interface, d policy.Decision) state.HookInterface {
	return state.HookInterface{MAC: macString(it), Kind: string(it.Kind), Name: it.Name, Backend: d.Backend,
		Profile: firstNonEmpty(it.Profile, policy.Throughput), Offer: d.OfferNames, Forced: it.Force.Attrs(),
		Dropped: maps.Clone(d.Dropped)}
}

// summary is the decision in one log line.
func summary(it Interface, iface string, d policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "interface %s (%s %s): backend %s", iface, it.Kind, it.Name, d.Backend)
	for _, s := range d.Steps {
		if s.Chosen {
			fmt.Fprintf(&b, " (%s)", s.Reason)
		}
	}
	fmt.Fprintf(&b, ", profile %s", firstNonEmpty(it.Profile, policy.Throughput))
	if a := it.Force.Attrs(); len(a) > 0 {
		fmt.Fprintf(&b, ", forced %s", strings.Join(a, ""))
	}
	fmt.Fprintf(&b, "; offers %s", strings.Join(append(d.OfferNames, "nothing")[:max(len(d.OfferNames), 1)], "|"))
	if d.QEMUVersion != "" {
		fmt.Fprintf(&b, " (QEMU %s)", d.QEMUVersion)
	}
	names := slices.Sorted(maps.Keys(d.Dropped))
	if len(names) > 0 {
		var drops []string
		for _, n := range names {
			drops = append(drops, n+" ("+d.Dropped[n]+")")
		}
		fmt.Fprintf(&b, "; drops %s", strings.Join(drops, ", "))
	}
	return b.String()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
