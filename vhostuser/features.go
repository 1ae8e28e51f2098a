package vhostuser

import (
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

// ringFeatures are the transport bits the bridge passes between the
// front-end and vhost-net, when vhost-net offers them. Left out on
// purpose: ANY_LAYOUT (bit 27, which vhost-net reads as
// VHOST_NET_F_VIRTIO_NET_HDR: the tap has its own header), ACCESS_PLATFORM
// (vhost-user needs BACKEND_REQ for an IOTLB, not offered) and RING_RESET
// (QEMU resets rings only on a tap peer).
const ringFeatures = virtio.NotifyOnEmpty | virtio.IndirectDesc | virtio.EventIdx | virtio.Version1 |
	virtio.NetMrgRxbuf | virtio.LogAll

// offloadFeatures maps each tap offload to the virtio-net bits it carries:
// the guest may receive what the tap's TUNSETOFFLOAD takes (GUEST_*), and
// may send the matching segments (HOST_*), which tun accepts from a
// virtio-net header whenever it accepts the offload itself.
var offloadFeatures = []struct {
	o macvtap.Offloads
	f virtio.Features
}{
	{macvtap.OffloadCSUM, virtio.NetCsum | virtio.NetGuestCsum},
	{macvtap.OffloadTSO4, virtio.NetHostTSO4 | virtio.NetGuestTSO4},
	{macvtap.OffloadTSO6, virtio.NetHostTSO6 | virtio.NetGuestTSO6},
	{macvtap.OffloadTSOECN, virtio.NetHostECN | virtio.NetGuestECN},
	{macvtap.OffloadUFO, virtio.NetHostUFO | virtio.NetGuestUFO},
	{macvtap.OffloadUSO4 | macvtap.OffloadUSO6, virtio.NetHostUSO | virtio.NetGuestUSO4 | virtio.NetGuestUSO6},
}

// compatOffloads is what the compat profile offers: checksum and TSO,
// which every supported kernel honours.
const compatOffloads = macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6

// offerFeatures is the GET_FEATURES answer: vhost-net's ring bits, the
// offload bits the tap takes (all but checksum need checksum), MQ with
// more than one queue pair, GUEST_ANNOUNCE (the VMM announces through its
// config space; the bridge has nothing to do), and bit 30.
func offerFeatures(vhost virtio.Features, tap macvtap.Offloads, queues int, profile string) virtio.Features {
	f := vhost&ringFeatures | virtio.Features(FeatureProtocolFeatures) | virtio.NetGuestAnnounce
	if vhost.Has(virtio.Version1) {
		// A VERSION_1 guest lays out buffers as it likes; vhost-net copies
		// through iovecs and never cares. Offer ANY_LAYOUT to the guest,
		// never to vhost-net (vhostFeatures).
		f |= virtio.AnyLayout
	}
	if profile == ProfileCompat {
		tap &= compatOffloads
	}
	if tap&macvtap.OffloadCSUM != 0 {
		for _, m := range offloadFeatures {
			if tap&m.o == m.o {
				f |= m.f
			}
		}
	}
	if queues > 1 {
		f |= virtio.NetMQ
	}
	return f
}

// vhostFeatures is what the bridge acknowledges to vhost-net for the
// front-end's acknowledged bits: only the ring bits vhost-net offers.
func vhostFeatures(acked, vhost virtio.Features) virtio.Features {
	return acked & ringFeatures & vhost
}

// The profiles, as netctl's policy names them.
const (
	ProfileThroughput = "throughput" // every offload the tap takes
	ProfileLatency    = "latency"    // the same, and vhost busy-polls each ring for LatencyBusyPollUS
	ProfileCompat     = "compat"     // checksum and TSO only
)

// LatencyBusyPollUS is the busy-poll timeout the latency profile sets on
// every ring (µs), as netctl attach does.
const LatencyBusyPollUS = 50
