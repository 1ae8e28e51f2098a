package hook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// MigrateBegin is `migrate begin` on the destination of an incoming
// migration: libvirt runs it before it starts the destination QEMU, with
// the domain's migratable XML on stdin, and cancels the migration (the
// source runs on) when it fails (qemuMigrationDstPrepareAny in libvirt's
// src/qemu/qemu_migration.c). It checks, creating nothing, that this host
// can carry each interface of p (which netctl manages):
//
//   - the backend the interface asks for (<driver name='vhost'> where
//     this host has no vhost-net is refused, as prepare would);
//   - the bits its <driver> forces on, and the pool's plan (Config.Pool),
//     as prepare decides them;
//   - every managed bit (tap offloads, USO, RING_RESET, ...) the domain
//     does not turn off (<driver><host/><guest/>, event_idx, or a
//     <qemu:override> property on its alias) that this host's backend
//     cannot offer: the guest may have negotiated it on the source, and
//     QEMU here refuses the stream only after the memory was copied
//     ("Features 0x... unsupported"). What the guest cannot have
//     negotiated is let through: a bit the domain's machine type turns
//     off (policy.MachineOff), and, with a plan, a bit no host of the plan
//     offers (the domain comes from a host of the pool). Without a plan
//     netctl cannot know what the source offered, and two hosts alike
//     never offered what they lack: such a bit passes, with a note and a
//     log line saying to name the plan (when in doubt, pass by);
//   - a vdpa interface's management device is here (the device itself,
//     and so its features, exist only once prepare creates it).
//
// A refusal is one line naming each interface, the bits and why, and
// what to do; it wraps errs.ErrNotSupported (errs.ErrNotAvailable for a
// missing backend). MigrateBegin never rewrites the XML: the CLI prints
// nothing on stdout, which libvirt takes for "unchanged".
func (h *Hook) MigrateBegin(ctx context.Context, p *Plan) (*Result, error) {
	res := &Result{Domain: p.Domain, Op: "migrate"}
	if len(p.Interfaces) == 0 {
		return res, nil
	}
	desc, err := h.Devices.Probe(ctx, hostnic.ProbeSpec{QEMU: true, Macvtap: slices.ContainsFunc(p.Interfaces, func(it Interface) bool { return it.Kind == KindDirect })})
	if err != nil {
		return nil, fmt.Errorf("domain %s: probing this host before the migration comes in: %w (the migration is cancelled; the domain runs on at the source)", p.Domain, err)
	}
	var someHost virtio.Features = ^virtio.Features(0)
	if h.Config != nil && h.Config.plan != nil {
		someHost = h.Config.plan.someHost
	}
	var refusals []string
	var wraps []error
	for i, it := range p.Interfaces {
		iface := ifaceName(it.MAC, i)
		if it.Kind == KindVDPA {
			if why := vdpaHere(desc, it); why != "" {
				refusals = append(refusals, fmt.Sprintf("interface %s (vdpa %s): %s", iface, it.Name, why))
				wraps = append(wraps, errs.ErrNotAvailable)
				continue
			}
			n := fmt.Sprintf("interface %s: vdpa management device %s is here (the device's features are checked when prepare creates it)", iface, it.Mgmtdev)
			res.Notes = append(res.Notes, n)
			h.logf("%s migrate: %s", p.Domain, n)
			continue
		}
		// As prepare will decide here: the backend, the forced bits, the
		// pool.
		d, err := decide(desc, p.Type, it, nil, h.Config.Pool(), iface)
		if err == nil {
			var carried virtio.Features
			var why map[string]string
			if carried, why, err = carriedHere(desc, p.Type, it, d.Backend, iface); err == nil {
				risky := policyBits &^ carried &^ it.Force.Off &^ it.Pinned &^ policy.MachineOff(p.Machine) & someHost
				switch {
				case risky != 0 && h.Config.Pool() != nil:
					refusals = append(refusals, riskyLine(p.Domain, it, iface, d.Backend, risky, why))
					wraps = append(wraps, errs.ErrNotSupported)
					continue
				case risky != 0:
					// Without a plan netctl cannot tell what the source
					// offered (two hosts alike never offered it): when
					// in doubt, pass by and say why.
					n := fmt.Sprintf("interface %s: passed, unchecked: this host cannot offer %v, which the domain does not turn off; whether the guest negotiated it depends on the source, "+
						"which netctl does not know: name the pool's plan in the host config (plan = POOL.json, from netctl plan -j) to have migrations checked, or pin the domain (netctl hook pin)",
						iface, risky)
					res.Notes = append(res.Notes, n)
					h.logf("%s migrate: %s", p.Domain, n)
					continue
				}
			}
		}
		if err != nil {
			refusals = append(refusals, err.Error())
			wraps = append(wraps, err)
			continue
		}
		n := fmt.Sprintf("interface %s: can come here: backend %s carries every bit the guest may have negotiated", iface, d.Backend)
		res.Notes = append(res.Notes, n)
		h.logf("%s migrate: %s", p.Domain, n)
	}
	if len(refusals) > 0 {
		err := &refusal{msg: fmt.Sprintf("domain %s cannot migrate to this host: %s; the migration is cancelled and the domain runs on at the source",
			p.Domain, strings.Join(refusals, "; ")), errs: wraps}
		h.logf("%s migrate: refused: %v", p.Domain, err)
		return nil, err
	}
	return res, nil
}

// refusal is migrate begin's one line for all the interfaces it refuses;
// it wraps each one's error (errs.ErrNotSupported, ErrNotAvailable, ...).
type refusal struct {
	msg  string
	errs []error
}

func (r *refusal) Error() string   { return r.msg }
func (r *refusal) Unwrap() []error { return r.errs }

// vdpaHere says why a vdpa interface cannot come to this host ("" when
// its management device is here).
func vdpaHere(desc *host.Description, it Interface) string {
	if !desc.VDPA.Available {
		return "this host has no vdpa (" + firstNonEmpty(desc.VDPA.Error, "the probe found none") + "): load vdpa and the management device's driver here, or migrate to a host that has them"
	}
	for _, m := range desc.VDPA.MgmtDevs {
		_, name, _ := strings.Cut(m, "/")
		if m == it.Mgmtdev || name == it.Mgmtdev {
			return ""
		}
	}
	return fmt.Sprintf("this host has no vdpa management device %s (it has: %s; vdpa mgmtdev show): load its driver here, or migrate to a host that has it",
		it.Mgmtdev, strings.Join(append(slices.Clone(desc.VDPA.MgmtDevs), "none")[:max(len(desc.VDPA.MgmtDevs), 1)], ", "))
}

// carriedHere is what backend offers on this host for it, whatever the
// domain forces, its profile and the pool: the bits QEMU here offers
// unless the domain turns them off. why says, for each managed bit it
// does not carry, policy's reason.
func carriedHere(desc *host.Description, domType string, it Interface, backend, iface string) (virtio.Features, map[string]string, error) {
	bare := it
	bare.Force, bare.Profile, bare.Backend = Forced{}, policy.Throughput, backend
	d, err := decide(desc, domType, bare, nil, nil, iface)
	if err != nil {
		return 0, nil, err
	}
	return d.Offer, d.Dropped, nil
}

// riskyLine says which bits of risky the interface of domain may have
// negotiated at the source and this host cannot offer, why, and how to
// turn them off.
func riskyLine(domain string, it Interface, iface, backend string, risky virtio.Features, why map[string]string) string {
	var bits, driver, props []string
	for _, b := range risky.Bits() {
		f := virtio.Bit(b)
		w := firstNonEmpty(why[virtio.BitName(b)], "not offered by backend "+backend)
		if it.Kind == KindDirect {
			w = strings.ReplaceAll(w, "tun on ", "macvtap on ") // decide probed a macvtap's offloads
		}
		bits = append(bits, fmt.Sprintf("%s (%s)", virtio.BitName(b), w))
		prop, value := propOf(f)
		if a, ok := policy.LibvirtAttrFor(prop); ok {
			if a.Side == "" {
				driver = append(driver, fmt.Sprintf("<driver %s='%s'>", a.Attr, value))
			} else {
				driver = append(driver, attrOf(f, false))
			}
			continue
		}
		if prop != "" {
			props = append(props, fmt.Sprintf("<qemu:property name='%s' type='bool' value='%s'/>", prop, map[string]string{"off": "false", "on": "true"}[value]))
		}
	}
	var pin []string
	if len(driver) > 0 {
		pin = append(pin, strings.Join(driver, " "))
	}
	if len(props) > 0 {
		pin = append(pin, fmt.Sprintf("<qemu:override><qemu:device alias='%s'><qemu:frontend>%s</qemu:frontend></qemu:device></qemu:override>", clip(it.Alias), strings.Join(props, "")))
	}
	them := "them"
	if len(bits) == 1 {
		them = "it"
	}
	// netctl hook pin on the source writes that pin into the definition,
	// with a user alias for the override (ua-netctl-MAC): an alias
	// libvirt generates (net1) is not kept in a definition and names
	// another interface once one is added before it.
	how := "netctl hook pin " + clip(domain) + " on the source, with the plan in its hook config, writes it"
	return fmt.Sprintf("interface %s (%s %s, backend %s): this host cannot offer %s, which the domain does not turn off, so the guest may have negotiated %s at the source "+
		"and QEMU here would refuse the migration after copying the memory: turn %s off in the domain (%s: what netctl plan -j HOST.json... pins for the pool; %s), restart it, and migrate again",
		iface, it.Kind, it.Name, backend, strings.Join(bits, ", "), them, them, strings.Join(pin, " and "), how)
}

// propOf is the virtio-net-pci property that drops f and its value.
func propOf(f virtio.Features) (string, string) {
	for p, d := range dropProps {
		if d.f == f {
			return p, d.value
		}
	}
	return "", ""
}
