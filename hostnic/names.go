package hostnic

import (
	"crypto/rand"
	"fmt"
	"net"
	"strings"

	"github.com/netctl/netctl/internal/lazyre"
	"github.com/netctl/netctl/state"
)

// Names netctl gives what it creates for a NIC: taps nctlN, macvtaps
// nctlmvN (the kernel fills in N), vdpa devices netctl-ID.
const (
	TapTemplate     = "nctl%d"
	MacvtapTemplate = "nctlmv%d"
	VDPAPrefix      = "netctl-"
)

var (
	createdTapName     = lazyre.New(`^nctl[0-9]+$`)
	createdMacvtapName = lazyre.New(`^nctlmv[0-9]+$`)
)

// VDPAName is the name of the vdpa device netctl creates for NIC id
// (VDPAPrefix and id, cut to the kernel's 32 bytes).
func VDPAName(id string) string {
	name := VDPAPrefix + id
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// NotCreatedLink says why a link of kind ("tap" or "macvtap") that a
// record (outside input: a file anyone with root can edit) says netctl
// created must be left alone; "" when it is netctl's to delete (if still
// the same link).
func NotCreatedLink(kind string, l *state.Link) string {
	pat, tmpl := createdTapName, "nctlN"
	if kind == "macvtap" {
		pat, tmpl = createdMacvtapName, "nctlmvN"
	}
	switch {
	case !pat.MatchString(l.Name):
		return fmt.Sprintf("the record says netctl created it, but netctl names the %ss it creates %s: an edited record?", kind, tmpl)
	case l.Ifindex <= 0:
		return "the record says netctl created it but has no ifindex for it, so another link of that name cannot be told apart"
	}
	return ""
}

// NotCreatedVDPA is NotCreatedLink for a vdpa device.
func NotCreatedVDPA(v *state.VDPA) string {
	if !strings.HasPrefix(v.Name, VDPAPrefix) {
		return "the record says netctl created it, but netctl names the vdpa devices it creates " + VDPAPrefix + "ID: an edited record?"
	}
	return ""
}

// ValidVDPAName says whether s can name a vdpa device netctl touches:
// 1 to 32 bytes of letters, digits, '-' and '_' (nothing that walks out
// of /sys/bus/vdpa/devices).
func ValidVDPAName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// RandomMAC is 52:54:00 (QEMU's prefix, locally administered) and three
// random bytes: the guest's MAC when none is asked for.
func RandomMAC() net.HardwareAddr {
	b := make([]byte, 3)
	rand.Read(b)
	return net.HardwareAddr{0x52, 0x54, 0x00, b[0], b[1], b[2]}
}
