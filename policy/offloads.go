package policy

import (
	"fmt"
	"strings"

	"github.com/netctl/netctl/virtio"
)

// Offload is what netctl knows about one virtio-net offload bit: the QEMU
// property that turns it off, what a tap backend needs to honour it, and
// the QEMU and Linux versions that brought it. Decide, Plan and netctl
// diagnose all read this one table.
type Offload struct {
	F       virtio.Features
	Prop    string          // QEMU virtio-net property
	Libvirt string          // libvirt's <driver> sub-element that turns it off ("" when libvirt has none)
	RX      bool            // the guest receives such frames: the tap must have the offload set
	Tap     []string        // tap offloads (TUN_F_*) the backend needs, the bit's own flag first; nil: the virtio-net header alone
	Needs   virtio.Features // one of these must be acknowledged too (the spec's dependencies)
	QEMU    string          // first QEMU with the property, "" for old ones
	Linux   string          // first Linux whose tun takes the tap offloads, "" for old ones
}

// Offloads lists the offload bits, checksum first.
var Offloads = []Offload{
	{virtio.NetCsum, "csum", "<host csum='off'/>", false, nil, 0, "", ""},
	{virtio.NetGuestCsum, "guest_csum", "<guest csum='off'/>", true, []string{"csum"}, 0, "", ""},
	{virtio.NetGuestTSO4, "guest_tso4", "<guest tso4='off'/>", true, []string{"csum", "tso4"}, virtio.NetGuestCsum, "", ""},
	{virtio.NetGuestTSO6, "guest_tso6", "<guest tso6='off'/>", true, []string{"csum", "tso6"}, virtio.NetGuestCsum, "", ""},
	{virtio.NetGuestECN, "guest_ecn", "<guest ecn='off'/>", true, []string{"csum", "tso_ecn"}, virtio.NetGuestTSO4 | virtio.NetGuestTSO6, "", ""},
	{virtio.NetGuestUFO, "guest_ufo", "<guest ufo='off'/>", true, []string{"csum", "ufo"}, virtio.NetGuestCsum, "", ""},
	{virtio.NetHostTSO4, "host_tso4", "<host tso4='off'/>", false, nil, virtio.NetCsum, "", ""},
	{virtio.NetHostTSO6, "host_tso6", "<host tso6='off'/>", false, nil, virtio.NetCsum, "", ""},
	{virtio.NetHostECN, "host_ecn", "<host ecn='off'/>", false, nil, virtio.NetHostTSO4 | virtio.NetHostTSO6, "", ""},
	{virtio.NetHostUFO, "host_ufo", "<host ufo='off'/>", false, []string{"ufo"}, virtio.NetCsum, "", ""},
	{virtio.NetGuestUSO4, "guest_uso4", "", true, []string{"csum", "uso4", "uso6"}, virtio.NetGuestCsum, "8.2", "6.2"},
	{virtio.NetGuestUSO6, "guest_uso6", "", true, []string{"csum", "uso6", "uso4"}, virtio.NetGuestCsum, "8.2", "6.2"},
	{virtio.NetHostUSO, "host_uso", "", false, []string{"uso4", "uso6"}, virtio.NetCsum, "8.2", "6.2"},
}

// Missing returns the first tap offload o needs that have lacks ("uso6"
// for GUEST_USO6: each bit's own flag comes before its partner's), or "".
func (o Offload) Missing(have []string) string {
	return firstMissing(o.Tap, have)
}

// Refusal says why a tun (kind "tun") or macvtap (kind "macvtap") on
// kernel cannot carry o when it lacks the tap offload missing (as Missing
// returns it): "tun on 6.1 refuses TUN_F_USO6; UDP segmentation offload
// needs Linux 6.2". HOST_USO is the transmit side: the guest sends USO
// frames and tun must take virtio-net headers with gso_type
// VIRTIO_NET_HDR_GSO_UDP_L4, which virtio_net_hdr_to_skb refuses before
// Linux 6.2 (QEMU probes for it with TUNSETOFFLOAD's USO flags). The
// reason names the transmit side, not GUEST_USO4's TUN_F_USO4.
func (o Offload) Refusal(kind, kernel, missing string) string {
	if kernel == "" {
		kernel = "this kernel"
	}
	if o.F == virtio.NetHostUSO && (missing == "uso4" || missing == "uso6") {
		return fmt.Sprintf("%s on %s takes no USO frames from the guest (a virtio-net header with gso_type UDP_L4 gives EINVAL), "+
			"and QEMU offers HOST_USO only where %s takes the USO offloads; UDP segmentation offload needs Linux 6.2", kind, kernel, kind)
	}
	return fmt.Sprintf("%s on %s refuses TUN_F_%s%s", kind, kernel, strings.ToUpper(missing), linuxNeeded(missing))
}
