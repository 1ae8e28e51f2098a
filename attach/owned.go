package attach

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/netctl/netctl/state"
)

// Names netctl gives what it creates for a NIC: taps nctlN, macvtaps
// nctlmvN (the kernel fills in N), vdpa devices netctl-ID.
var (
	createdTapName     = regexp.MustCompile(`^nctl[0-9]+$`)
	createdMacvtapName = regexp.MustCompile(`^nctlmv[0-9]+$`)
)

const createdVDPAPrefix = "netctl-"

// notCreatedLink says why detach and gc must leave alone a link that a
// record (outside input: a file anyone with root can edit) says netctl
// created; "" when it is netctl's to delete (if still the same link).
func notCreatedLink(kind string, l *state.Link) string {
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

// notCreatedVDPA is notCreatedLink for a vdpa device.
func notCreatedVDPA(v *state.VDPA) string {
	if !strings.HasPrefix(v.Name, createdVDPAPrefix) {
		return "the record says netctl created it, but netctl names the vdpa devices it creates " + createdVDPAPrefix + "ID: an edited record?"
	}
	return ""
}
