package diagnose

import (
	"fmt"
	"io"
	"strings"
)

// NeedsMonitor are the figures of a NIC that only QEMU's monitor knows:
// libvirt does not report them (netctl diagnose --qemu-monitor asks QEMU
// through libvirt for them, which taints the domain).
var NeedsMonitor = []string{
	"the virtio feature bits the device offers and the guest's driver acknowledged (x-query-virtio-status), so which offloads the guest really uses",
	"whether vhost started for the NIC, and the device status (DRIVER_OK, a reset under way)",
	"the NIC's feature properties and their defaults (qom-get, device-list-properties), and so why a feature is off",
}

// TaintedNote is what the output says after --qemu-monitor.
const TaintedNote = "QEMU was asked through libvirt's monitor passthrough (virDomainQemuMonitorCommand): libvirt has marked the domain \"tainted: custom-monitor\" (virsh dominfo and its log say so until the domain stops)"

// LibvirtNIC is one interface of a running libvirt domain, as libvirt's
// live XML describes it, with its host side where it is on this host.
type LibvirtNIC struct {
	Alias    string   `json:"alias"`
	MAC      string   `json:"mac,omitempty"`
	Model    string   `json:"model,omitempty"`
	Type     string   `json:"type"`             // ethernet, network, bridge, direct, vdpa, ...
	Target   string   `json:"target,omitempty"` // <target dev>: the tap or macvtap (the vdpa node)
	Driver   string   `json:"driver"`           // <driver name>: vhost, qemu or "" (libvirt's default)
	Queues   uint     `json:"queues,omitempty"`
	Offloads []string `json:"offloads,omitempty"` // <host/> and <guest/> attributes, as libvirt writes them
	Runs     string   `json:"runs"`               // one line: what the interface runs
	// Tap is the host side read on this host (tun flags, queues, the
	// offloads on it now); nil when it is not here (Errors says why).
	Tap    *TapState `json:"tap,omitempty"`
	Errors []string  `json:"errors,omitempty"`
}

// LibvirtReport is what netctl diagnose --vm DOMAIN says of a libvirt
// domain from what libvirt itself reports (and, with --qemu-monitor,
// beside QEMU's explanation).
type LibvirtReport struct {
	URI    string       `json:"uri"`
	Domain string       `json:"domain"`
	UUID   string       `json:"uuid"`
	NICs   []LibvirtNIC `json:"nics"`
	// NeedsMonitor: what was not read because only QEMU's monitor knows
	// it (empty when --qemu-monitor read it).
	NeedsMonitor []string `json:"needs_qemu_monitor,omitempty"`
	// Tainted: QEMU was asked through libvirt (TaintedNote).
	Tainted bool `json:"tainted_custom_monitor"`
}

// WriteTable writes the report for people.
func (r *LibvirtReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "libvirt domain %s (%s) on %s: %d virtio interface(s), from libvirt's live XML\n", safe(r.Domain), r.UUID, safe(r.URI), len(r.NICs))
	for _, n := range r.NICs {
		fmt.Fprintf(&b, "  %s: %s\n", safe(n.Alias), safe(n.Runs))
		if n.MAC != "" {
			fmt.Fprintf(&b, "    mac %s, model %s\n", safe(n.MAC), safe(n.Model))
		}
		if t := n.Tap; t != nil {
			kind := "tap"
			if t.Macvtap {
				kind = "macvtap"
			}
			off := strings.Join(t.Offloads, " ")
			switch {
			case t.OffloadsUnknown:
				off = "not readable on a macvtap"
			case off == "":
				off = "none"
			}
			fmt.Fprintf(&b, "    host %s %s: vnet_hdr %s, %d queue(s) attached, offloads on it: %s\n", kind, safe(t.Name), yesNo(t.VnetHdr), t.Queues, safe(off))
		}
		for _, e := range n.Errors {
			fmt.Fprintf(&b, "    not read: %s\n", safe(e))
		}
	}
	if len(r.NeedsMonitor) > 0 {
		b.WriteString("Not read: only QEMU's monitor knows these, and libvirt holds it. --qemu-monitor asks QEMU through libvirt\n" +
			"(virDomainQemuMonitorCommand), after which libvirt marks the domain \"tainted: custom-monitor\":\n")
		for _, m := range r.NeedsMonitor {
			fmt.Fprintf(&b, "  - %s\n", m)
		}
	}
	if r.Tainted {
		fmt.Fprintf(&b, "tainted: custom-monitor: %s\n", TaintedNote)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// safe replaces control characters (libvirt's XML is the domain owner's
// text) so the table cannot move the terminal's cursor.
func safe(s string) string {
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
