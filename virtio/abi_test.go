package virtio

import (
	"testing"

	"github.com/netctl/netctl/internal/linux"
)

// TestBitsMatchTheKernelHeaders: the bit numbers are written out here so
// that virtio (and the pure packages that use it, such as policy) import
// nothing that touches the kernel; they must stay equal to internal/linux's
// copies of include/uapi/linux/virtio_net.h, virtio_config.h, virtio_ring.h
// and vhost.h.
func TestBitsMatchTheKernelHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Features
		bit  uint
	}{
		{"NetCsum", NetCsum, linux.VIRTIO_NET_F_CSUM},
		{"NetGuestCsum", NetGuestCsum, linux.VIRTIO_NET_F_GUEST_CSUM},
		{"NetCtrlGuestOffloads", NetCtrlGuestOffloads, linux.VIRTIO_NET_F_CTRL_GUEST_OFFLOADS},
		{"NetMTU", NetMTU, linux.VIRTIO_NET_F_MTU},
		{"NetMAC", NetMAC, linux.VIRTIO_NET_F_MAC},
		{"NetGSO", NetGSO, linux.VIRTIO_NET_F_GSO},
		{"NetGuestTSO4", NetGuestTSO4, linux.VIRTIO_NET_F_GUEST_TSO4},
		{"NetGuestTSO6", NetGuestTSO6, linux.VIRTIO_NET_F_GUEST_TSO6},
		{"NetGuestECN", NetGuestECN, linux.VIRTIO_NET_F_GUEST_ECN},
		{"NetGuestUFO", NetGuestUFO, linux.VIRTIO_NET_F_GUEST_UFO},
		{"NetHostTSO4", NetHostTSO4, linux.VIRTIO_NET_F_HOST_TSO4},
		{"NetHostTSO6", NetHostTSO6, linux.VIRTIO_NET_F_HOST_TSO6},
		{"NetHostECN", NetHostECN, linux.VIRTIO_NET_F_HOST_ECN},
		{"NetHostUFO", NetHostUFO, linux.VIRTIO_NET_F_HOST_UFO},
		{"NetMrgRxbuf", NetMrgRxbuf, linux.VIRTIO_NET_F_MRG_RXBUF},
		{"NetStatus", NetStatus, linux.VIRTIO_NET_F_STATUS},
		{"NetCtrlVQ", NetCtrlVQ, linux.VIRTIO_NET_F_CTRL_VQ},
		{"NetCtrlRx", NetCtrlRx, linux.VIRTIO_NET_F_CTRL_RX},
		{"NetCtrlVLAN", NetCtrlVLAN, linux.VIRTIO_NET_F_CTRL_VLAN},
		{"NetCtrlRxExtra", NetCtrlRxExtra, linux.VIRTIO_NET_F_CTRL_RX_EXTRA},
		{"NetGuestAnnounce", NetGuestAnnounce, linux.VIRTIO_NET_F_GUEST_ANNOUNCE},
		{"NetMQ", NetMQ, linux.VIRTIO_NET_F_MQ},
		{"NetCtrlMACAddr", NetCtrlMACAddr, linux.VIRTIO_NET_F_CTRL_MAC_ADDR},
		{"NetDeviceStats", NetDeviceStats, linux.VIRTIO_NET_F_DEVICE_STATS},
		{"NetVQNotfCoal", NetVQNotfCoal, linux.VIRTIO_NET_F_VQ_NOTF_COAL},
		{"NetNotfCoal", NetNotfCoal, linux.VIRTIO_NET_F_NOTF_COAL},
		{"NetGuestUSO4", NetGuestUSO4, linux.VIRTIO_NET_F_GUEST_USO4},
		{"NetGuestUSO6", NetGuestUSO6, linux.VIRTIO_NET_F_GUEST_USO6},
		{"NetHostUSO", NetHostUSO, linux.VIRTIO_NET_F_HOST_USO},
		{"NetHashReport", NetHashReport, linux.VIRTIO_NET_F_HASH_REPORT},
		{"NetGuestHdrLen", NetGuestHdrLen, linux.VIRTIO_NET_F_GUEST_HDRLEN},
		{"NetRSS", NetRSS, linux.VIRTIO_NET_F_RSS},
		{"NetRSCExt", NetRSCExt, linux.VIRTIO_NET_F_RSC_EXT},
		{"NetStandby", NetStandby, linux.VIRTIO_NET_F_STANDBY},
		{"NetSpeedDuplex", NetSpeedDuplex, linux.VIRTIO_NET_F_SPEED_DUPLEX},
		{"NotifyOnEmpty", NotifyOnEmpty, linux.VIRTIO_F_NOTIFY_ON_EMPTY},
		{"LogAll", LogAll, linux.VHOST_F_LOG_ALL},
		{"AnyLayout", AnyLayout, linux.VIRTIO_F_ANY_LAYOUT},
		{"IndirectDesc", IndirectDesc, linux.VIRTIO_RING_F_INDIRECT_DESC},
		{"EventIdx", EventIdx, linux.VIRTIO_RING_F_EVENT_IDX},
		{"Version1", Version1, linux.VIRTIO_F_VERSION_1},
		{"AccessPlatform", AccessPlatform, linux.VIRTIO_F_ACCESS_PLATFORM},
		{"RingPacked", RingPacked, linux.VIRTIO_F_RING_PACKED},
		{"InOrder", InOrder, linux.VIRTIO_F_IN_ORDER},
		{"OrderPlatform", OrderPlatform, linux.VIRTIO_F_ORDER_PLATFORM},
		{"SRIOV", SRIOV, linux.VIRTIO_F_SR_IOV},
		{"NotificationData", NotificationData, linux.VIRTIO_F_NOTIFICATION_DATA},
		{"NotifConfigData", NotifConfigData, linux.VIRTIO_F_NOTIF_CONFIG_DATA},
		{"RingReset", RingReset, linux.VIRTIO_F_RING_RESET},
		{"AdminVQ", AdminVQ, linux.VIRTIO_F_ADMIN_VQ},
	} {
		if c.f != Bit(c.bit) {
			t.Errorf("%s = %#x, the kernel's bit is %d", c.name, uint64(c.f), c.bit)
		}
	}
}
