// Package virtio holds the typed virtio feature set shared by netctl's
// packages: the bits of include/uapi/linux/virtio_net.h, virtio_config.h
// and virtio_ring.h, plus the two vhost-specific bits that share the word.
// A Features value prints its bits by name ("VERSION_1|EVENT_IDX|bit 58").
package virtio

import (
	"math/bits"
	"strconv"
	"strings"
)

// Features is a 64-bit virtio feature word.
type Features uint64

// Bit returns the feature word with only bit n set.
func Bit(n uint) Features { return 1 << n }

// Named feature bits.
const (
	NetCsum              = Features(1) << 0
	NetGuestCsum         = Features(1) << 1
	NetCtrlGuestOffloads = Features(1) << 2
	NetMTU               = Features(1) << 3
	NetMAC               = Features(1) << 5
	NetGSO               = Features(1) << 6
	NetGuestTSO4         = Features(1) << 7
	NetGuestTSO6         = Features(1) << 8
	NetGuestECN          = Features(1) << 9
	NetGuestUFO          = Features(1) << 10
	NetHostTSO4          = Features(1) << 11
	NetHostTSO6          = Features(1) << 12
	NetHostECN           = Features(1) << 13
	NetHostUFO           = Features(1) << 14
	NetMrgRxbuf          = Features(1) << 15
	NetStatus            = Features(1) << 16
	NetCtrlVQ            = Features(1) << 17
	NetCtrlRx            = Features(1) << 18
	NetCtrlVLAN          = Features(1) << 19
	NetCtrlRxExtra       = Features(1) << 20
	NetGuestAnnounce     = Features(1) << 21
	NetMQ                = Features(1) << 22
	NetCtrlMACAddr       = Features(1) << 23
	NetDeviceStats       = Features(1) << 50
	NetVQNotfCoal        = Features(1) << 52
	NetNotfCoal          = Features(1) << 53
	NetGuestUSO4         = Features(1) << 54 // Linux 6.2
	NetGuestUSO6         = Features(1) << 55 // Linux 6.2
	NetHostUSO           = Features(1) << 56 // Linux 6.2
	NetHashReport        = Features(1) << 57
	NetGuestHdrLen       = Features(1) << 59
	NetRSS               = Features(1) << 60
	NetRSCExt            = Features(1) << 61
	NetStandby           = Features(1) << 62
	NetSpeedDuplex       = Features(1) << 63

	NotifyOnEmpty     = Features(1) << 24
	LogAll            = Features(1) << 26 // vhost: dirty-page logging
	AnyLayout         = Features(1) << 27
	VhostNetVirtioHdr = AnyLayout // vhost-net: vhost adds/strips the header (same bit 27)
	IndirectDesc      = Features(1) << 28
	EventIdx          = Features(1) << 29
	Version1          = Features(1) << 32
	AccessPlatform    = Features(1) << 33
	RingPacked        = Features(1) << 34
	InOrder           = Features(1) << 35
	OrderPlatform     = Features(1) << 36
	SRIOV             = Features(1) << 37
	NotificationData  = Features(1) << 38
	NotifConfigData   = Features(1) << 39
	RingReset         = Features(1) << 40
	AdminVQ           = Features(1) << 41
)

// names of the bits, as the kernel headers spell them without prefixes
// (VIRTIO_NET_F_, VIRTIO_F_, VIRTIO_RING_F_, VHOST_F_).
var names = [64]string{
	0: "CSUM", 1: "GUEST_CSUM", 2: "CTRL_GUEST_OFFLOADS", 3: "MTU", 5: "MAC", 6: "GSO",
	7: "GUEST_TSO4", 8: "GUEST_TSO6", 9: "GUEST_ECN", 10: "GUEST_UFO", 11: "HOST_TSO4",
	12: "HOST_TSO6", 13: "HOST_ECN", 14: "HOST_UFO", 15: "MRG_RXBUF", 16: "STATUS",
	17: "CTRL_VQ", 18: "CTRL_RX", 19: "CTRL_VLAN", 20: "CTRL_RX_EXTRA", 21: "GUEST_ANNOUNCE",
	22: "MQ", 23: "CTRL_MAC_ADDR", 24: "NOTIFY_ON_EMPTY", 26: "LOG_ALL", 27: "ANY_LAYOUT",
	28: "INDIRECT_DESC", 29: "EVENT_IDX", 32: "VERSION_1", 33: "ACCESS_PLATFORM",
	34: "RING_PACKED", 35: "IN_ORDER", 36: "ORDER_PLATFORM", 37: "SR_IOV",
	38: "NOTIFICATION_DATA", 39: "NOTIF_CONFIG_DATA", 40: "RING_RESET", 41: "ADMIN_VQ",
	50: "DEVICE_STATS", 52: "VQ_NOTF_COAL", 53: "NOTF_COAL", 54: "GUEST_USO4",
	55: "GUEST_USO6", 56: "HOST_USO", 57: "HASH_REPORT", 59: "GUEST_HDRLEN", 60: "RSS",
	61: "RSC_EXT", 62: "STANDBY", 63: "SPEED_DUPLEX",
}

// BitName returns the name of bit n ("GUEST_USO4"), or "bit N".
func BitName(n uint) string {
	if n < 64 && names[n] != "" {
		return names[n]
	}
	return "bit " + strconv.Itoa(int(n))
}

// Has reports whether every bit of x is set in f.
func (f Features) Has(x Features) bool { return f&x == x }

// Bits lists the set bit numbers, lowest first.
func (f Features) Bits() []uint {
	var bs []uint
	for v := uint64(f); v != 0; v &= v - 1 {
		bs = append(bs, uint(bits.TrailingZeros64(v)))
	}
	return bs
}

// Names lists the names of the set bits, lowest first.
func (f Features) Names() []string {
	var ns []string
	for _, b := range f.Bits() {
		ns = append(ns, BitName(b))
	}
	return ns
}

// String prints the set bits by name, lowest first: "MRG_RXBUF|VERSION_1".
// The empty set prints as "0".
func (f Features) String() string {
	if f == 0 {
		return "0"
	}
	return strings.Join(f.Names(), "|")
}
