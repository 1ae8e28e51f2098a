package policy

import (
	"strings"

	"github.com/netctl/netctl/virtio"
)

// Requirement is one feature dependency of the virtio spec: F may be
// offered only together with at least one of AnyOf.
type Requirement struct {
	F     virtio.Features
	AnyOf virtio.Features
}

// Requirements are virtio-net's feature dependencies (virtio 1.3, 5.1.3.1
// "Feature bit requirements"; the control-queue ones are also what Linux's
// virtnet_validate_features refuses). Every Decision and every Plan offers
// a set closed under them.
var Requirements = []Requirement{
	{virtio.NetGuestTSO4, virtio.NetGuestCsum},
	{virtio.NetGuestTSO6, virtio.NetGuestCsum},
	{virtio.NetGuestECN, virtio.NetGuestTSO4 | virtio.NetGuestTSO6},
	{virtio.NetGuestUFO, virtio.NetGuestCsum},
	{virtio.NetGuestUSO4, virtio.NetGuestCsum},
	{virtio.NetGuestUSO6, virtio.NetGuestCsum},
	{virtio.NetHostTSO4, virtio.NetCsum},
	{virtio.NetHostTSO6, virtio.NetCsum},
	{virtio.NetHostECN, virtio.NetHostTSO4 | virtio.NetHostTSO6},
	{virtio.NetHostUFO, virtio.NetCsum},
	{virtio.NetHostUSO, virtio.NetCsum},
	{virtio.NetRSCExt, virtio.NetHostTSO4 | virtio.NetHostTSO6},
	{virtio.NetCtrlRx, virtio.NetCtrlVQ},
	{virtio.NetCtrlRxExtra, virtio.NetCtrlRx},
	{virtio.NetCtrlVLAN, virtio.NetCtrlVQ},
	{virtio.NetGuestAnnounce, virtio.NetCtrlVQ},
	{virtio.NetMQ, virtio.NetCtrlVQ},
	{virtio.NetCtrlMACAddr, virtio.NetCtrlVQ},
	{virtio.NetCtrlGuestOffloads, virtio.NetCtrlVQ},
	{virtio.NetRSS, virtio.NetCtrlVQ},
	{virtio.NetHashReport, virtio.NetCtrlVQ},
	{virtio.NetNotfCoal, virtio.NetCtrlVQ},
	{virtio.NetVQNotfCoal, virtio.NetCtrlVQ},
	{virtio.NetDeviceStats, virtio.NetCtrlVQ},
}

// Unmet returns the features of f whose requirements f does not meet.
func Unmet(f virtio.Features) virtio.Features {
	var bad virtio.Features
	for _, r := range Requirements {
		if f.Has(r.F) && f&r.AnyOf == 0 {
			bad |= r.F
		}
	}
	return bad
}

// Close removes from f, until none is left, every feature whose
// requirement is not met, and calls drop (if not nil) for each removed
// feature with the requirement it lacked ("GUEST_CSUM", "HOST_TSO4 or
// HOST_TSO6"). The result is the largest subset of f closed under
// Requirements.
func Close(f virtio.Features, drop func(f virtio.Features, needs string)) virtio.Features {
	for {
		bad := virtio.Features(0)
		for _, r := range Requirements {
			if f.Has(r.F) && f&r.AnyOf == 0 && bad&r.F == 0 {
				bad |= r.F
				if drop != nil {
					drop(r.F, strings.Join(r.AnyOf.Names(), " or "))
				}
			}
		}
		if bad == 0 {
			return f
		}
		f &^= bad
	}
}
