package diagnose

import (
	"fmt"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// qemuDefaultOn are the ring bits QEMU's virtio-net offers by default
// (DEFINE_VIRTIO_COMMON_FEATURES, mrg_rxbuf, VERSION_1 on a modern
// device; queue_reset from QEMU 7.2, which x-query-virtio-status needs
// anyway). Explain uses them when the device type's defaults
// (Snapshot.Defaults) were not read.
const qemuDefaultOn = virtio.IndirectDesc | virtio.EventIdx | virtio.NotifyOnEmpty | virtio.AnyLayout | virtio.RingReset |
	virtio.NetMrgRxbuf | virtio.Version1

// propOf is the NIC property that turns f off, or "".
func propOf(f virtio.Features) string {
	for _, o := range policy.Offloads {
		if o.F == f {
			return o.Prop
		}
	}
	return otherProps[f]
}

// bitOfProp is the feature bit a NIC property turns off, or 0.
func bitOfProp(p string) virtio.Features {
	for _, o := range policy.Offloads {
		if o.Prop == p {
			return o.F
		}
	}
	for f, q := range otherProps {
		if q == p {
			return f
		}
	}
	return 0
}

// kernelVhost says whether the NIC runs on the kernel's vhost-net, from
// QMP alone: a vhost-dev member on a tap netdev, or, when the netdev is
// unknown (a bare reply), a vhost-dev whose offer holds no offload and no
// VHOST_USER_F_PROTOCOL_FEATURES (vhost-vdpa and vhost-user devices offer
// the offloads themselves; vhost-net offers ring bits only).
func (e *explainer) kernelVhost() bool {
	if e.q.Vhost == nil || e.s.VDPA != nil {
		return false
	}
	switch e.s.Netdev.Type {
	case "tap":
		return true
	case "":
		offer, _ := e.q.Vhost.Features.word()
		for _, o := range policy.Offloads {
			if offer.Has(o.F) {
				return false
			}
		}
		return !offer.Has(virtio.Bit(30))
	}
	return false
}

// vhostAddsHeader: QEMU asked vhost-net for VHOST_NET_F_VIRTIO_NET_HDR
// (bit 27, which QMP prints as ANY_LAYOUT), as it does when the tap has no
// virtio-net header (vnet_hdr=off): vhost-net then adds and strips the
// guest's header itself (hw/net/vhost_net.c vhost_net_init).
func (e *explainer) vhostAddsHeader() bool {
	return e.hasVhostOffer && e.vhostAcked.Has(virtio.AnyLayout)
}

// noHeader: the tap carries no virtio-net header, as read from the tap or
// told by vhost-net's acknowledged features.
func (e *explainer) noHeader() bool {
	if t := e.s.Tap; t != nil {
		return !t.VnetHdr
	}
	return e.vhostAddsHeader()
}

// setOff says how QEMU's command line set property p off, or "".
func (e *explainer) setOff(p string) string {
	v, ok := e.s.Cmdline[p]
	if p == "" || !ok {
		return ""
	}
	switch v {
	case "off", "false", "no", "n", "OFF", "False", "FALSE":
		return fmt.Sprintf("set off on QEMU's command line (-device %s,...,%s=%s)", orElse(e.s.Driver, "virtio-net-pci"), p, v)
	}
	return ""
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// defaultOffer are the bits the NIC's device type offers by default but
// that QEMU ended up not offering: each gets a row saying which layer
// dropped it. With the type's defaults unread, these are the ring bits
// QEMU offers by default that vhost-net did not offer.
func (e *explainer) defaultOffer() virtio.Features {
	var f virtio.Features
	switch {
	case e.s.Defaults != nil:
		for p, on := range e.s.Defaults {
			if on {
				f |= bitOfProp(p)
			}
		}
	case e.hasVhostOffer:
		f = qemuDefaultOn & vhostKernelBits &^ e.vhostOffer
	}
	return f &^ e.host
}

// ringNotOffered explains why QEMU did not offer a ring, control or
// transport bit, and names the layer (Row.Layer). vhost-net's offer comes
// before the NIC's property: QEMU writes the offer left after vhost-net's
// refusal back into the common properties (queue_reset, event_idx, ...),
// so such a property reads off although nobody set it.
func (e *explainer) ringNotOffered(f virtio.Features) (layer, why string) {
	p := propOf(f)
	if why := e.setOff(p); why != "" {
		return "cmdline", why
	}
	on, has := e.s.Props[p]
	propOff := p != "" && has && !on
	if e.hasVhostOffer && vhostKernelBits.Has(f) && !e.vhostOffer.Has(f) {
		why := "the host's vhost-net does not offer it, so QEMU does not either"
		if e.kernel != "" {
			why = fmt.Sprintf("vhost-net on %s does not offer it, so QEMU does not either", e.kernel)
		}
		if propOff {
			why += fmt.Sprintf(" (QEMU writes that back: the NIC's property %s reads off)", p)
		}
		return "vhost-net", why
	}
	switch {
	case propOff:
		why := fmt.Sprintf("the NIC's property %s is off", p)
		if on, known := e.s.Defaults[p]; known && !on {
			return "property", fmt.Sprintf("the NIC's property %s is off, its default (-device %s,...,%s=on turns it on)", p, orElse(e.s.Driver, "virtio-net-pci"), p)
		}
		if e.s.Cmdline != nil && e.s.Defaults[p] {
			why += fmt.Sprintf(" although %s defaults to on and the command line does not set it: "+
				"the machine type's compat settings or a -global turn it off", orElse(e.s.Driver, "the device type"))
		}
		return "property", why
	case f == virtio.RingReset && e.s.Props != nil && !has:
		return "qemu", fmt.Sprintf("QEMU %s has no queue_reset property: RING_RESET needs QEMU 7.2", orDash(e.s.QEMU))
	}
	return "", "QEMU did not offer it"
}
