package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/netctl/netctl/virtio"
)

// LibvirtAttr is the attribute of a domain's <interface><driver> that
// sets one virtio-net-pci property (libvirt's formatdomain, "Setting NIC
// driver-specific options"; qemuBuildNicDevProps): Side "host" or "guest"
// for the sub-elements, "" for <driver> itself.
type LibvirtAttr struct {
	Side, Attr, Prop string
}

// LibvirtAttrs are the properties netctl decides that libvirt's <driver>
// can set. host gso is not here: policy does not decide it.
var LibvirtAttrs = []LibvirtAttr{
	{"host", "csum", "csum"},
	{"host", "tso4", "host_tso4"},
	{"host", "tso6", "host_tso6"},
	{"host", "ecn", "host_ecn"},
	{"host", "ufo", "host_ufo"},
	{"host", "mrg_rxbuf", "mrg_rxbuf"},
	{"guest", "csum", "guest_csum"},
	{"guest", "tso4", "guest_tso4"},
	{"guest", "tso6", "guest_tso6"},
	{"guest", "ecn", "guest_ecn"},
	{"guest", "ufo", "guest_ufo"},
	{"", "event_idx", "event_idx"},
}

// LibvirtAttrFor is the <driver> attribute that sets prop, if libvirt has
// one.
func LibvirtAttrFor(prop string) (LibvirtAttr, bool) {
	i := slices.IndexFunc(LibvirtAttrs, func(a LibvirtAttr) bool { return a.Prop == prop })
	if i < 0 {
		return LibvirtAttr{}, false
	}
	return LibvirtAttrs[i], true
}

// PropFeature is the managed bit that property prop turns off.
func PropFeature(prop string) (virtio.Features, bool) {
	for _, m := range managed {
		if m.prop == prop {
			return m.f, true
		}
	}
	return 0, false
}

// LibvirtPin is a plan's pin as libvirt's domain XML says it.
type LibvirtPin struct {
	// Driver is the <driver> element with the attributes to set on each
	// interface of the pool's domains (merge them into the interface's
	// own <driver>; its name and queues stay).
	Driver string `json:"driver"`
	// Override are the properties libvirt's <driver> has no attribute
	// for (queue_reset, the USO bits), as <qemu:override> (libvirt 8.2+)
	// sets them on the interface's device alias: QEMU property -> value.
	Override map[string]string `json:"qemu_override,omitempty"`
	// OverrideXML is Override for an interface with alias ALIAS (rename
	// it: libvirt names interfaces net0, net1, ... unless <alias
	// name='ua-...'/> says otherwise).
	OverrideXML string `json:"qemu_override_xml,omitempty"`
}

// libvirtPin turns the plan's QEMU properties (the common ones, and those
// only some hosts' QEMU has: libvirt sets a property only where the
// domain asks, so an override of a property a host's QEMU lacks fails
// there: those are named in Override all the same, since the hosts that
// lack the property do not offer the feature) into libvirt XML.
func libvirtPin(common map[string]string, byHost map[string]map[string]string) LibvirtPin {
	props := maps.Clone(common)
	for _, m := range byHost {
		for k, v := range m {
			props[k] = v
		}
	}
	var drv, host, guest []string
	pin := LibvirtPin{}
	for _, p := range slices.Sorted(maps.Keys(props)) {
		if p == "mq" || p == "vectors" {
			continue // libvirt sets them from <driver queues>
		}
		a, ok := LibvirtAttrFor(p)
		if !ok {
			if pin.Override == nil {
				pin.Override = map[string]string{}
			}
			pin.Override[p] = props[p]
			continue
		}
		attr := fmt.Sprintf("%s='%s'", a.Attr, props[p])
		switch a.Side {
		case "host":
			host = append(host, attr)
		case "guest":
			guest = append(guest, attr)
		default:
			drv = append(drv, attr)
		}
	}
	var b strings.Builder
	b.WriteString("<driver")
	for _, a := range drv {
		b.WriteString(" " + a)
	}
	if len(host) == 0 && len(guest) == 0 {
		b.WriteString("/>")
	} else {
		b.WriteString(">")
		if len(host) > 0 {
			b.WriteString("<host " + strings.Join(host, " ") + "/>")
		}
		if len(guest) > 0 {
			b.WriteString("<guest " + strings.Join(guest, " ") + "/>")
		}
		b.WriteString("</driver>")
	}
	pin.Driver = b.String()
	if len(pin.Override) > 0 {
		var o strings.Builder
		o.WriteString("<qemu:override><qemu:device alias='ALIAS'><qemu:frontend>")
		for _, p := range slices.Sorted(maps.Keys(pin.Override)) {
			fmt.Fprintf(&o, "<qemu:property name='%s' type='bool' value='%s'/>", p, boolValue(pin.Override[p]))
		}
		o.WriteString("</qemu:frontend></qemu:device></qemu:override>")
		pin.OverrideXML = o.String()
	}
	return pin
}

// boolValue is QEMU's on/off as <qemu:property type='bool'> spells it.
func boolValue(v string) string {
	if v == "on" {
		return "true"
	}
	return "false"
}
