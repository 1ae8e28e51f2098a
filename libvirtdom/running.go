package libvirtdom

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// Runs is what a running domain's interface runs, from its live XML:
// never from a decision or a record.
type Runs struct {
	Type   string `json:"type"`             // ethernet, vdpa, direct, ...
	Target string `json:"target,omitempty"` // the host-side device libvirt uses
	Alias  string `json:"alias,omitempty"`
	// Driver is <driver name>: vhost (vhost-net), qemu (QEMU's own
	// virtio-net), or "" (libvirt's default: vhost-net where it can open
	// /dev/vhost-net, else QEMU's).
	Driver string `json:"driver"`
	Queues uint   `json:"queues,omitempty"`
	// Offloads are the <host/> and <guest/> attributes the live domain
	// has, as libvirt writes them ("<host csum='off'/>").
	Offloads []string `json:"offloads,omitempty"`
	// VhostNet is whether the tap netdev QEMU was started with runs
	// vhost-net, "on" or "off", from QEMU's command line (NetdevVhost);
	// "" when not known (not read, or the interface was hotplugged).
	VhostNet string `json:"vhost_net,omitempty"`
}

// RunsOf reads what x (an interface of a live XML) runs.
func RunsOf(x *libvirtxml.DomainInterface) Runs {
	r := Runs{Alias: Alias(x)}
	switch s := x.Source; {
	case s == nil:
	case s.Ethernet != nil:
		r.Type = "ethernet"
	case s.VDPA != nil:
		r.Type, r.Target = "vdpa", s.VDPA.Device
	case s.Direct != nil:
		r.Type = "direct"
	case s.Network != nil:
		r.Type = "network"
	case s.Bridge != nil:
		r.Type = "bridge"
	case s.User != nil:
		r.Type = "user"
	default:
		r.Type = "other"
	}
	if x.Target != nil && r.Target == "" {
		r.Target = x.Target.Dev
	}
	if d := x.Driver; d != nil {
		r.Driver, r.Queues = d.Name, d.Queues
		if d.Host != nil {
			for _, a := range []struct{ n, v string }{{"csum", d.Host.CSum}, {"gso", d.Host.GSO}, {"tso4", d.Host.TSO4}, {"tso6", d.Host.TSO6},
				{"ecn", d.Host.ECN}, {"ufo", d.Host.UFO}, {"mrg_rxbuf", d.Host.MrgRXBuf}} {
				if a.v != "" {
					r.Offloads = append(r.Offloads, fmt.Sprintf("<host %s='%s'/>", a.n, clip(a.v)))
				}
			}
		}
		if d.Guest != nil {
			for _, a := range []struct{ n, v string }{{"csum", d.Guest.CSum}, {"tso4", d.Guest.TSO4}, {"tso6", d.Guest.TSO6},
				{"ecn", d.Guest.ECN}, {"ufo", d.Guest.UFO}} {
				if a.v != "" {
					r.Offloads = append(r.Offloads, fmt.Sprintf("<guest %s='%s'/>", a.n, clip(a.v)))
				}
			}
		}
	}
	return r
}

// String is one line: "ethernet nctl0 (net0): driver qemu (QEMU's own
// virtio-net, no vhost); vhost-net off (QEMU's command line), 2 queue(s),
// <host csum='on'/> ...".
func (r Runs) String() string {
	var b strings.Builder
	b.WriteString(r.Type)
	if r.Target != "" {
		b.WriteString(" " + clip(r.Target))
	}
	if r.Alias != "" {
		b.WriteString(" (" + clip(r.Alias) + ")")
	}
	switch {
	case r.Type == "vdpa":
		b.WriteString(": vhost-vdpa")
	case r.Driver == "vhost":
		b.WriteString(": driver vhost (vhost-net)")
	case r.Driver == "qemu":
		b.WriteString(": driver qemu (QEMU's own virtio-net, no vhost)")
	case r.Driver == "":
		b.WriteString(": no driver name (libvirt's default: vhost-net if it could open /dev/vhost-net, else QEMU's own)")
	default:
		b.WriteString(": driver " + clip(r.Driver))
	}
	if r.VhostNet != "" {
		fmt.Fprintf(&b, "; vhost-net %s (QEMU's command line)", r.VhostNet)
	}
	fmt.Fprintf(&b, ", %d queue(s)", max(r.Queues, 1))
	if len(r.Offloads) > 0 {
		b.WriteString(", " + strings.Join(r.Offloads, " "))
	}
	return b.String()
}
