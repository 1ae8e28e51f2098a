package libvirtdom

import (
	"fmt"
	"maps"
	"slices"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// offloadAttr is one attribute of libvirt's <driver><host/> or <guest/>
// (formatdomain, "Setting NIC driver-specific options"), the QEMU
// virtio-net property libvirt sets from it (qemuBuildNicDevProps) and the
// feature bit. host gso is not here: virtio deprecates GSO and policy does
// not decide it, so netctl leaves it as the domain has it.
type offloadAttr struct {
	side, attr, prop string
	f                virtio.Features
}

var offloadAttrs = func() []offloadAttr {
	var as []offloadAttr
	for _, a := range policy.LibvirtAttrs {
		f, ok := policy.PropFeature(a.Prop)
		if a.Side == "" || !ok {
			continue // <driver event_idx> is set on its own below
		}
		as = append(as, offloadAttr{a.Side, a.Attr, a.Prop, f})
	}
	return as
}()

// set writes v into d's attribute a.
func (a offloadAttr) set(d *libvirtxml.DomainInterfaceDriver, v string) {
	if a.side == "host" {
		if d.Host == nil {
			d.Host = &libvirtxml.DomainInterfaceDriverHost{}
		}
		switch a.attr {
		case "csum":
			d.Host.CSum = v
		case "tso4":
			d.Host.TSO4 = v
		case "tso6":
			d.Host.TSO6 = v
		case "ecn":
			d.Host.ECN = v
		case "ufo":
			d.Host.UFO = v
		case "mrg_rxbuf":
			d.Host.MrgRXBuf = v
		}
		return
	}
	if d.Guest == nil {
		d.Guest = &libvirtxml.DomainInterfaceDriverGuest{}
	}
	switch a.attr {
	case "csum":
		d.Guest.CSum = v
	case "tso4":
		d.Guest.TSO4 = v
	case "tso6":
		d.Guest.TSO6 = v
	case "ecn":
		d.Guest.ECN = v
	case "ufo":
		d.Guest.UFO = v
	}
}

// libvirtProps are the virtio-net properties libvirt sets itself from
// what it has (mq and vectors from <driver queues>, event_idx from
// <driver event_idx>), beside offloadAttrs.
var libvirtProps = map[string]bool{"mq": true, "vectors": true, "event_idx": true}

// DriverName is libvirt's <driver name> for a backend: vhost for
// vhost-net, qemu for QEMU's userspace virtio-net, "" for vdpa (a vdpa
// interface has no driver name; its data path is the device).
func DriverName(backend string) string {
	switch backend {
	case policy.BackendVhostNet:
		return "vhost"
	case policy.BackendUserspace:
		return "qemu"
	}
	return ""
}

// Pinned is the <driver> netctl writes for a decision, and what the
// decision holds that libvirt's XML cannot express.
type Pinned struct {
	Driver *libvirtxml.DomainInterfaceDriver
	// Override are the QEMU bool properties d sets that <driver> has no
	// attribute for (queue_reset, host_uso, ...): what <qemu:override>
	// on the interface's alias can set when QEMU starts (Override),
	// never on a hotplug. nil when none.
	Override    map[string]bool
	Unexpressed []string
}

// DriverFor is the <driver> that makes libvirt start QEMU with decision
// d: name from the backend (DriverName), queues (0 leaves libvirt's
// default of one), every <host/> and <guest/> offload attribute on for a
// bit d offers and off for one it does not, and event_idx likewise. It
// starts from old (the domain's own <driver>, may be nil), so attributes
// netctl does not decide (txmode, ioeventfd, rx_queue_size, iommu, host
// gso, ...) stay as they are. Override are the on/off QEMU properties
// of d that only <qemu:override> sets (queue_reset=off, guest_uso4=off).
// Unexpressed names, one line each, what d asks that libvirt has no XML
// for at all: vhost-net busy polling (profile latency) and any other
// QEMU property.
func DriverFor(old *libvirtxml.DomainInterfaceDriver, d policy.Decision, queues int) Pinned {
	var drv libvirtxml.DomainInterfaceDriver
	if old != nil {
		drv = *old
		if old.Host != nil {
			h := *old.Host
			drv.Host = &h
		}
		if old.Guest != nil {
			g := *old.Guest
			drv.Guest = &g
		}
	}
	drv.Name = DriverName(d.Backend)
	if queues > 0 {
		drv.Queues = uint(queues)
	}
	for _, a := range offloadAttrs {
		a.set(&drv, onOff(d.Offer.Has(a.f)))
	}
	drv.EventIDX = onOff(d.Offer.Has(virtio.EventIdx))
	var un []string
	var ov map[string]bool
	for _, p := range slices.Sorted(maps.Keys(d.QEMU)) {
		if libvirtProps[p] || slices.ContainsFunc(offloadAttrs, func(a offloadAttr) bool { return a.prop == p }) {
			continue
		}
		if v := d.QEMU[p]; v == "on" || v == "off" {
			if ov == nil {
				ov = map[string]bool{}
			}
			ov[p] = v == "on"
			continue
		}
		un = append(un, fmt.Sprintf("QEMU property %s=%s: libvirt's <driver> has no attribute for it, so QEMU keeps its default", p, d.QEMU[p]))
	}
	if d.BusyPollUS > 0 {
		un = append(un, fmt.Sprintf("vhost-net busy polling of %d µs (profile latency): libvirt's XML has no poll-us for an interface, so vhost-net runs without it", d.BusyPollUS))
	}
	return Pinned{Driver: &drv, Override: ov, Unexpressed: un}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
