package diagnose

import (
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

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
	for _, o := range policy.Offloads {
		ps = append(ps, o.Prop)
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
