package hook

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// Forced is what an interface's <driver><host .../><guest .../></driver>
// forces: On are the virtio-net features the domain insists on (libvirt
// sets the QEMU property to on), Off those it turns off. A bit is in at
// most one of them.
type Forced struct {
	On, Off virtio.Features
}

// driverAttr is one attribute of libvirt's <driver><host/> or <guest/>
// and the virtio-net feature its QEMU property (libvirt's
// qemuBuildNicDevProps) controls: host_* are the device's side (the guest
// sends offloaded frames), guest_* the driver's (the guest receives them).
type driverAttr struct {
	side, attr string
	f          virtio.Features
}

// driverAttrs lists every attribute libvirt has, in the order of its
// docs (formatdomain.rst, "Setting NIC driver-specific options").
var driverAttrs = []driverAttr{
	{"host", "csum", virtio.NetCsum},
	{"host", "gso", virtio.NetGSO},
	{"host", "tso4", virtio.NetHostTSO4},
	{"host", "tso6", virtio.NetHostTSO6},
	{"host", "ecn", virtio.NetHostECN},
	{"host", "ufo", virtio.NetHostUFO},
	{"host", "mrg_rxbuf", virtio.NetMrgRxbuf},
	{"guest", "csum", virtio.NetGuestCsum},
	{"guest", "tso4", virtio.NetGuestTSO4},
	{"guest", "tso6", virtio.NetGuestTSO6},
	{"guest", "ecn", virtio.NetGuestECN},
	{"guest", "ufo", virtio.NetGuestUFO},
}

// value is the attribute's value in d ("" when absent).
func (a driverAttr) value(d *libvirtxml.DomainInterfaceDriver) string {
	if h := d.Host; a.side == "host" && h != nil {
		return map[string]string{"csum": h.CSum, "gso": h.GSO, "tso4": h.TSO4, "tso6": h.TSO6, "ecn": h.ECN, "ufo": h.UFO, "mrg_rxbuf": h.MrgRXBuf}[a.attr]
	}
	if g := d.Guest; a.side == "guest" && g != nil {
		return map[string]string{"csum": g.CSum, "tso4": g.TSO4, "tso6": g.TSO6, "ecn": g.ECN, "ufo": g.UFO}[a.attr]
	}
	return ""
}

// policyBits are the forced bits policy.Decide decides about; the rest
// (GSO, which virtio deprecates and policy does not manage) the hook
// checks itself.
var policyBits = func() virtio.Features {
	var f virtio.Features
	for _, o := range policy.Offloads {
		f |= o.F
	}
	for _, r := range policy.RingFeatures {
		f |= r.F
	}
	return f
}()

// attrOf is the attribute that forces f ("<guest tso4='on'/>"), or the
// feature's name when libvirt has none.
func attrOf(f virtio.Features, on bool) string {
	v := "off"
	if on {
		v = "on"
	}
	for _, a := range driverAttrs {
		if a.f == f {
			return fmt.Sprintf("<%s %s='%s'/>", a.side, a.attr, v)
		}
	}
	return bitName(f)
}

func bitName(f virtio.Features) string {
	if b := f.Bits(); len(b) > 0 {
		return virtio.BitName(b[0])
	}
	return "none"
}

// parseForced reads what d forces. A value other than on or off (libvirt
// itself accepts only those) is an error wrapping errs.ErrInvalid. Then
// it refuses a bit forced on whose prerequisite the domain forces off
// (virtio 1.3, 5.1.3.1, the table in policy.Requirements: tso4='on' with
// csum='off'): the guest could never get it, and QEMU would start anyway
// and drop it silently.
func parseForced(d *libvirtxml.DomainInterfaceDriver, iface string) (Forced, error) {
	var f Forced
	if d == nil {
		return f, nil
	}
	for _, a := range driverAttrs {
		switch v := a.value(d); v {
		case "":
		case "on":
			f.On |= a.f
		case "off":
			f.Off |= a.f
		default:
			return f, fmt.Errorf("interface %s: <driver><%s %s=%q/>: use 'on' or 'off': %w", iface, a.side, a.attr, clip(v), errs.ErrInvalid)
		}
	}
	for _, r := range policy.Requirements {
		if !f.On.Has(r.F) || r.AnyOf&^f.Off != 0 {
			continue
		}
		var needs, drops []string
		for _, b := range r.AnyOf.Bits() {
			needs = append(needs, attrOf(virtio.Bit(b), true))
			drops = append(drops, attrOf(virtio.Bit(b), false))
		}
		return f, fmt.Errorf("interface %s: <driver>%s needs %s, which the domain forces off with %s "+
			"(virtio 1.3, 5.1.3.1: %s requires %s): drop one of them: %w",
			iface, attrOf(r.F, true), strings.Join(needs, " or "), strings.Join(drops, " and "),
			bitName(r.F), strings.Join(r.AnyOf.Names(), " or "), errs.ErrInvalid)
	}
	return f, nil
}

// Attrs lists the forced attributes, on ones first ("<host tso4='on'/>").
func (f Forced) Attrs() []string {
	var out []string
	for _, on := range []bool{true, false} {
		set := f.Off
		if on {
			set = f.On
		}
		for _, a := range driverAttrs {
			if set.Has(a.f) {
				out = append(out, attrOf(a.f, on))
			}
		}
	}
	return out
}
