package macvtap

import (
	"fmt"
	"strings"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// Offloads is a set of TUNSETOFFLOAD flags (include/uapi/linux/if_tun.h):
// what the reader of a tap or macvtap queue accepts in the frames the
// kernel hands it, i.e. the guest's receive offloads.
type Offloads uint32

// Offload flags. Every flag but CSUM needs CSUM; USO4 and USO6 go together
// and came in Linux 6.2.
const (
	OffloadCSUM   Offloads = linux.TUN_F_CSUM
	OffloadTSO4   Offloads = linux.TUN_F_TSO4
	OffloadTSO6   Offloads = linux.TUN_F_TSO6
	OffloadTSOECN Offloads = linux.TUN_F_TSO_ECN
	OffloadUFO    Offloads = linux.TUN_F_UFO
	OffloadUSO4   Offloads = linux.TUN_F_USO4
	OffloadUSO6   Offloads = linux.TUN_F_USO6

	// OffloadAll is every flag netctl knows.
	OffloadAll = OffloadCSUM | OffloadTSO4 | OffloadTSO6 | OffloadTSOECN | OffloadUFO | OffloadUSO4 | OffloadUSO6
)

var offloadNames = []struct {
	f    Offloads
	name string
}{
	{OffloadCSUM, "csum"}, {OffloadTSO4, "tso4"}, {OffloadTSO6, "tso6"}, {OffloadTSOECN, "tso_ecn"},
	{OffloadUFO, "ufo"}, {OffloadUSO4, "uso4"}, {OffloadUSO6, "uso6"},
}

// Names lists the set flags by name: csum, tso4, tso6, tso_ecn, ufo, uso4,
// uso6 (and "0xNN" for unknown bits).
func (o Offloads) Names() []string {
	var ns []string
	rest := o
	for _, n := range offloadNames {
		if o&n.f != 0 {
			ns = append(ns, n.name)
			rest &^= n.f
		}
	}
	if rest != 0 {
		ns = append(ns, fmt.Sprintf("%#x", uint32(rest)))
	}
	return ns
}

// String prints the flags as "csum|tso4|tso6", or "none".
func (o Offloads) String() string {
	if o == 0 {
		return "none"
	}
	return strings.Join(o.Names(), "|")
}

// ParseOffloads reads names as String prints them, separated by | , or
// spaces; "none" is the empty set.
func ParseOffloads(s string) (Offloads, error) {
	var o Offloads
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' || r == ' ' }) {
		if w == "none" {
			continue
		}
		found := false
		for _, n := range offloadNames {
			if strings.EqualFold(w, n.name) {
				o |= n.f
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown offload %q: use csum, tso4, tso6, tso_ecn, ufo, uso4, uso6", w)
		}
	}
	return o, nil
}

// OffloadDecision is the result of mapping guest features to offloads:
// the flags to set and, for each guest receive offload left off, why.
type OffloadDecision struct {
	Offloads Offloads
	Dropped  map[virtio.Features]string // guest feature bit -> reason it has no offload
}

// OffloadsFor maps the features a guest acknowledged to the offloads its
// backend must accept, as QEMU does: GUEST_CSUM -> CSUM, GUEST_TSO4 -> TSO4,
// GUEST_TSO6 -> TSO6, GUEST_ECN -> TSO_ECN, GUEST_UFO -> UFO, and
// GUEST_USO4 with GUEST_USO6 -> USO4|USO6 (the kernel takes them only
// together). Every flag needs CSUM, so without GUEST_CSUM nothing is set.
// Only guest receive features matter: HOST_* features are what the guest
// sends, which the kernel accepts whatever the offloads say.
func OffloadsFor(acked virtio.Features) OffloadDecision {
	d := OffloadDecision{Dropped: map[virtio.Features]string{}}
	rx := []struct {
		f virtio.Features
		o Offloads
	}{
		{virtio.NetGuestTSO4, OffloadTSO4}, {virtio.NetGuestTSO6, OffloadTSO6}, {virtio.NetGuestECN, OffloadTSOECN},
		{virtio.NetGuestUFO, OffloadUFO},
	}
	if !acked.Has(virtio.NetGuestCsum) {
		for _, m := range rx {
			if acked.Has(m.f) {
				d.Dropped[m.f] = "the guest did not acknowledge GUEST_CSUM, which every receive offload needs"
			}
		}
		for _, f := range []virtio.Features{virtio.NetGuestUSO4, virtio.NetGuestUSO6} {
			if acked.Has(f) {
				d.Dropped[f] = "the guest did not acknowledge GUEST_CSUM, which every receive offload needs"
			}
		}
		return d
	}
	d.Offloads = OffloadCSUM
	for _, m := range rx {
		if acked.Has(m.f) {
			d.Offloads |= m.o
		}
	}
	if d.Offloads&OffloadTSOECN != 0 && d.Offloads&(OffloadTSO4|OffloadTSO6) == 0 {
		d.Offloads &^= OffloadTSOECN
		d.Dropped[virtio.NetGuestECN] = "GUEST_ECN without GUEST_TSO4 or GUEST_TSO6: the kernel takes TSO_ECN only with TSO"
	}
	u4, u6 := acked.Has(virtio.NetGuestUSO4), acked.Has(virtio.NetGuestUSO6)
	switch {
	case u4 && u6:
		d.Offloads |= OffloadUSO4 | OffloadUSO6
	case u4:
		d.Dropped[virtio.NetGuestUSO4] = "GUEST_USO4 without GUEST_USO6: tun and macvtap take USO4 and USO6 only together"
	case u6:
		d.Dropped[virtio.NetGuestUSO6] = "GUEST_USO6 without GUEST_USO4: tun and macvtap take USO4 and USO6 only together"
	}
	return d
}
