package diagnose

import (
	"github.com/netctl/netctl/virtio"
)

// offload is what diagnose knows about one offload bit.
type offload struct {
	f     virtio.Features
	prop  string          // QEMU virtio-net property
	virsh string          // libvirt's <driver> sub-element attribute
	rx    bool            // the guest receives such frames: the tap must have the offload set
	tap   []string        // tap offloads (TUN_F_*) the backend needs; nil: the header alone
	needs virtio.Features // one of these must be acknowledged too (the spec's dependencies)
	qemu  string          // first QEMU with the property, "" for old ones
	linux string          // first Linux whose tun takes the tap offloads, "" for old ones
}

var offloads = []offload{
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
	{virtio.NetGuestUSO6, "guest_uso6", "", true, []string{"csum", "uso4", "uso6"}, virtio.NetGuestCsum, "8.2", "6.2"},
	{virtio.NetHostUSO, "host_uso", "", false, []string{"uso4", "uso6"}, virtio.NetCsum, "8.2", "6.2"},
}

// otherProps are the NIC properties of the ring and control bits.
var otherProps = map[virtio.Features]string{
	virtio.NetMrgRxbuf:          "mrg_rxbuf",
	virtio.NetStatus:            "status",
	virtio.NetCtrlVQ:            "ctrl_vq",
	virtio.NetCtrlRx:            "ctrl_rx",
	virtio.NetCtrlVLAN:          "ctrl_vlan",
	virtio.NetCtrlRxExtra:       "ctrl_rx_extra",
	virtio.NetCtrlMACAddr:       "ctrl_mac_addr",
	virtio.NetCtrlGuestOffloads: "ctrl_guest_offloads",
	virtio.NetGuestAnnounce:     "guest_announce",
	virtio.NetMQ:                "mq",
	virtio.NetRSS:               "rss",
	virtio.NetHashReport:        "hash",
	virtio.NetGSO:               "gso",
	virtio.EventIdx:             "event_idx",
	virtio.IndirectDesc:         "indirect_desc",
	virtio.AnyLayout:            "any_layout",
	virtio.NotifyOnEmpty:        "notify_on_empty",
	virtio.RingPacked:           "packed",
	virtio.RingReset:            "queue_reset",
	virtio.AccessPlatform:       "iommu_platform",
}

// Props lists every NIC property Gather reads.
func Props() []string {
	var ps []string
	for _, o := range offloads {
		ps = append(ps, o.prop)
	}
	for _, p := range otherProps {
		ps = append(ps, p)
	}
	return ps
}

// ethtoolOffloads maps the ethtool features a tap shows to the tap
// offloads (TUN_F_*) that turn them on: tun sets exactly these features
// from TUNSETOFFLOAD. UFO has none: tun takes TUN_F_UFO and ignores it.
var ethtoolOffloads = map[string][]string{
	"tx-checksum-ip-generic":  {"csum"},
	"tx-tcp-segmentation":     {"tso4"},
	"tx-tcp6-segmentation":    {"tso6"},
	"tx-tcp-ecn-segmentation": {"tso_ecn"},
	"tx-udp-segmentation":     {"uso4", "uso6"},
}

// TapOffloads returns the tap offloads set on a tap or macvtap whose
// active ethtool features are active.
func TapOffloads(active map[string]bool) []string {
	var out []string
	for _, name := range []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-tcp-ecn-segmentation", "tx-udp-segmentation"} {
		if active[name] {
			out = append(out, ethtoolOffloads[name]...)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// lowerFeature is the ethtool feature of the lower device that carries an
// offload in hardware.
var lowerFeature = map[virtio.Features][]string{
	virtio.NetCsum:      {"tx-checksum-ip-generic", "tx-checksum-ipv4", "tx-checksum-ipv6"},
	virtio.NetHostTSO4:  {"tx-tcp-segmentation"},
	virtio.NetHostTSO6:  {"tx-tcp6-segmentation"},
	virtio.NetHostECN:   {"tx-tcp-ecn-segmentation"},
	virtio.NetHostUSO:   {"tx-udp-segmentation"},
	virtio.NetGuestCsum: {"rx-checksum"},
	virtio.NetGuestTSO4: {"rx-gro-hw", "large-receive-offload"}, // hardware only: rx-gro is software
	virtio.NetGuestTSO6: {"rx-gro-hw", "large-receive-offload"},
}
