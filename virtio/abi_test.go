package virtio

import (
	"testing"

	"github.com/netctl/netctl/internal/linux"
)

// TestBitsMatchKernelABI: the package keeps its own bit numbers so that it
// stays pure; they must be the kernel's (internal/linux mirrors the
// headers and is checked against kernel-facts.md).
func TestBitsMatchKernelABI(t *testing.T) {
	for _, c := range []struct {
		f   Features
		bit uint
	}{
		{NetCsum, linux.VIRTIO_NET_F_CSUM}, {NetGuestCsum, linux.VIRTIO_NET_F_GUEST_CSUM},
		{NetCtrlGuestOffloads, linux.VIRTIO_NET_F_CTRL_GUEST_OFFLOADS}, {NetMTU, linux.VIRTIO_NET_F_MTU},
		{NetMAC, linux.VIRTIO_NET_F_MAC}, {NetGSO, linux.VIRTIO_NET_F_GSO},
		{NetGuestTSO4, linux.VIRTIO_NET_F_GUEST_TSO4}, {NetGuestTSO6, linux.VIRTIO_NET_F_GUEST_TSO6},
		{NetGuestECN, linux.VIRTIO_NET_F_GUEST_ECN}, {NetGuestUFO, linux.VIRTIO_NET_F_GUEST_UFO},
		{NetHostTSO4, linux.VIRTIO_NET_F_HOST_TSO4}, {NetHostTSO6, linux.VIRTIO_NET_F_HOST_TSO6},
		{NetHostECN, linux.VIRTIO_NET_F_HOST_ECN}, {NetHostUFO, linux.VIRTIO_NET_F_HOST_UFO},
		{NetMrgRxbuf, linux.VIRTIO_NET_F_MRG_RXBUF}, {NetStatus, linux.VIRTIO_NET_F_STATUS},
		{NetCtrlVQ, linux.VIRTIO_NET_F_CTRL_VQ}, {NetCtrlRx, linux.VIRTIO_NET_F_CTRL_RX},
		{NetCtrlVLAN, linux.VIRTIO_NET_F_CTRL_VLAN}, {NetCtrlRxExtra, linux.VIRTIO_NET_F_CTRL_RX_EXTRA},
		{NetGuestAnnounce, linux.VIRTIO_NET_F_GUEST_ANNOUNCE}, {NetMQ, linux.VIRTIO_NET_F_MQ},
		{NetCtrlMACAddr, linux.VIRTIO_NET_F_CTRL_MAC_ADDR}, {NetDeviceStats, linux.VIRTIO_NET_F_DEVICE_STATS},
		{NetVQNotfCoal, linux.VIRTIO_NET_F_VQ_NOTF_COAL}, {NetNotfCoal, linux.VIRTIO_NET_F_NOTF_COAL},
		{NetGuestUSO4, linux.VIRTIO_NET_F_GUEST_USO4}, {NetGuestUSO6, linux.VIRTIO_NET_F_GUEST_USO6},
		{NetHostUSO, linux.VIRTIO_NET_F_HOST_USO}, {NetHashReport, linux.VIRTIO_NET_F_HASH_REPORT},
		{NetGuestHdrLen, linux.VIRTIO_NET_F_GUEST_HDRLEN}, {NetRSS, linux.VIRTIO_NET_F_RSS},
		{NetRSCExt, linux.VIRTIO_NET_F_RSC_EXT}, {NetStandby, linux.VIRTIO_NET_F_STANDBY},
		{NetSpeedDuplex, linux.VIRTIO_NET_F_SPEED_DUPLEX},
		{NotifyOnEmpty, linux.VIRTIO_F_NOTIFY_ON_EMPTY}, {LogAll, linux.VHOST_F_LOG_ALL},
		{AnyLayout, linux.VIRTIO_F_ANY_LAYOUT}, {VhostNetVirtioHdr, linux.VHOST_NET_F_VIRTIO_NET_HDR},
		{IndirectDesc, linux.VIRTIO_RING_F_INDIRECT_DESC}, {EventIdx, linux.VIRTIO_RING_F_EVENT_IDX},
		{Version1, linux.VIRTIO_F_VERSION_1}, {AccessPlatform, linux.VIRTIO_F_ACCESS_PLATFORM},
		{RingPacked, linux.VIRTIO_F_RING_PACKED}, {InOrder, linux.VIRTIO_F_IN_ORDER},
		{OrderPlatform, linux.VIRTIO_F_ORDER_PLATFORM}, {SRIOV, linux.VIRTIO_F_SR_IOV},
		{NotificationData, linux.VIRTIO_F_NOTIFICATION_DATA}, {NotifConfigData, linux.VIRTIO_F_NOTIF_CONFIG_DATA},
		{RingReset, linux.VIRTIO_F_RING_RESET}, {AdminVQ, linux.VIRTIO_F_ADMIN_VQ},
	} {
		if c.f != Bit(c.bit) {
			t.Errorf("%v is %#x; the kernel's bit %d is %#x", c.f, uint64(c.f), c.bit, uint64(Bit(c.bit)))
		}
	}
	if got := Features(linux.VHOST_NET_FEATURES_6_12).String(); got != "MRG_RXBUF|NOTIFY_ON_EMPTY|LOG_ALL|ANY_LAYOUT|INDIRECT_DESC|EVENT_IDX|VERSION_1|ACCESS_PLATFORM|RING_RESET" {
		t.Errorf("vhost-net's 6.12 word: %s", got)
	}
}
