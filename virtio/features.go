// Package virtio holds the typed virtio feature set shared by netctl's
// packages: the bits of include/uapi/linux/virtio_net.h, virtio_config.h
// and virtio_ring.h, plus the two vhost-specific bits that share the word.
// A Features value prints its bits by name ("VERSION_1|EVENT_IDX|bit 58").
//
// The package is pure: it imports no kernel interface (not even
// internal/linux, whose constants a test checks these bits against), so
// the pure parts of netctl (policy, the diagnose explanation) can use it.
package virtio

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/netctl/netctl/internal/errs"
)

// ErrInvalid is wrapped by ParseFeatures' errors (the same value as the
// other packages' ErrInvalid).
var ErrInvalid = errs.ErrInvalid

// Features is a 64-bit virtio feature word.
type Features uint64

// Bit returns the feature word with only bit n set.
func Bit(n uint) Features { return 1 << n }

// Named feature bits: the bit numbers of include/uapi/linux/virtio_net.h,
// virtio_config.h, virtio_ring.h and vhost_types.h (TestBitsMatchKernelABI
// checks them against internal/linux).
const (
	NetCsum              = Features(1) << 0  // VIRTIO_NET_F_CSUM
	NetGuestCsum         = Features(1) << 1  // VIRTIO_NET_F_GUEST_CSUM
	NetCtrlGuestOffloads = Features(1) << 2  // VIRTIO_NET_F_CTRL_GUEST_OFFLOADS
	NetMTU               = Features(1) << 3  // VIRTIO_NET_F_MTU
	NetMAC               = Features(1) << 5  // VIRTIO_NET_F_MAC
	NetGSO               = Features(1) << 6  // VIRTIO_NET_F_GSO
	NetGuestTSO4         = Features(1) << 7  // VIRTIO_NET_F_GUEST_TSO4
	NetGuestTSO6         = Features(1) << 8  // VIRTIO_NET_F_GUEST_TSO6
	NetGuestECN          = Features(1) << 9  // VIRTIO_NET_F_GUEST_ECN
	NetGuestUFO          = Features(1) << 10 // VIRTIO_NET_F_GUEST_UFO
	NetHostTSO4          = Features(1) << 11 // VIRTIO_NET_F_HOST_TSO4
	NetHostTSO6          = Features(1) << 12 // VIRTIO_NET_F_HOST_TSO6
	NetHostECN           = Features(1) << 13 // VIRTIO_NET_F_HOST_ECN
	NetHostUFO           = Features(1) << 14 // VIRTIO_NET_F_HOST_UFO
	NetMrgRxbuf          = Features(1) << 15 // VIRTIO_NET_F_MRG_RXBUF
	NetStatus            = Features(1) << 16 // VIRTIO_NET_F_STATUS
	NetCtrlVQ            = Features(1) << 17 // VIRTIO_NET_F_CTRL_VQ
	NetCtrlRx            = Features(1) << 18 // VIRTIO_NET_F_CTRL_RX
	NetCtrlVLAN          = Features(1) << 19 // VIRTIO_NET_F_CTRL_VLAN
	NetCtrlRxExtra       = Features(1) << 20 // VIRTIO_NET_F_CTRL_RX_EXTRA
	NetGuestAnnounce     = Features(1) << 21 // VIRTIO_NET_F_GUEST_ANNOUNCE
	NetMQ                = Features(1) << 22 // VIRTIO_NET_F_MQ
	NetCtrlMACAddr       = Features(1) << 23 // VIRTIO_NET_F_CTRL_MAC_ADDR
	NetDeviceStats       = Features(1) << 50 // VIRTIO_NET_F_DEVICE_STATS
	NetVQNotfCoal        = Features(1) << 52 // VIRTIO_NET_F_VQ_NOTF_COAL
	NetNotfCoal          = Features(1) << 53 // VIRTIO_NET_F_NOTF_COAL
	NetGuestUSO4         = Features(1) << 54 // VIRTIO_NET_F_GUEST_USO4, Linux 6.2
	NetGuestUSO6         = Features(1) << 55 // VIRTIO_NET_F_GUEST_USO6, Linux 6.2
	NetHostUSO           = Features(1) << 56 // VIRTIO_NET_F_HOST_USO, Linux 6.2
	NetHashReport        = Features(1) << 57 // VIRTIO_NET_F_HASH_REPORT
	NetGuestHdrLen       = Features(1) << 59 // VIRTIO_NET_F_GUEST_HDRLEN
	NetRSS               = Features(1) << 60 // VIRTIO_NET_F_RSS
	NetRSCExt            = Features(1) << 61 // VIRTIO_NET_F_RSC_EXT
	NetStandby           = Features(1) << 62 // VIRTIO_NET_F_STANDBY
	NetSpeedDuplex       = Features(1) << 63 // VIRTIO_NET_F_SPEED_DUPLEX

	NotifyOnEmpty     = Features(1) << 24 // VIRTIO_F_NOTIFY_ON_EMPTY
	LogAll            = Features(1) << 26 // VHOST_F_LOG_ALL: vhost dirty-page logging
	AnyLayout         = Features(1) << 27 // VIRTIO_F_ANY_LAYOUT
	VhostNetVirtioHdr = AnyLayout         // vhost-net: vhost adds/strips the header (same bit 27)
	IndirectDesc      = Features(1) << 28 // VIRTIO_RING_F_INDIRECT_DESC
	EventIdx          = Features(1) << 29 // VIRTIO_RING_F_EVENT_IDX
	Version1          = Features(1) << 32 // VIRTIO_F_VERSION_1
	AccessPlatform    = Features(1) << 33 // VIRTIO_F_ACCESS_PLATFORM
	RingPacked        = Features(1) << 34 // VIRTIO_F_RING_PACKED
	InOrder           = Features(1) << 35 // VIRTIO_F_IN_ORDER
	OrderPlatform     = Features(1) << 36 // VIRTIO_F_ORDER_PLATFORM
	SRIOV             = Features(1) << 37 // VIRTIO_F_SR_IOV
	NotificationData  = Features(1) << 38 // VIRTIO_F_NOTIFICATION_DATA
	NotifConfigData   = Features(1) << 39 // VIRTIO_F_NOTIF_CONFIG_DATA
	RingReset         = Features(1) << 40 // VIRTIO_F_RING_RESET
	AdminVQ           = Features(1) << 41 // VIRTIO_F_ADMIN_VQ
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

// maxNameLen bounds a name ParseFeature looks at: the longest spelling,
// "VIRTIO_NET_F_CTRL_GUEST_OFFLOADS", has 32 bytes.
const maxNameLen = 64

// bitPrefixes are the header prefixes ParseFeature accepts (at most one).
var bitPrefixes = []string{"VIRTIO_NET_F_", "VIRTIO_RING_F_", "VIRTIO_F_", "VHOST_F_"}

// ParseFeature returns the bit named name: a name as BitName prints it,
// case-insensitive (ASCII), with or without one VIRTIO_NET_F_, VIRTIO_F_,
// VIRTIO_RING_F_ or VHOST_F_ prefix, or "bit N" (N from 0 to 63, decimal,
// as BitName prints it). Any other input, including names over 64 bytes,
// gives false.
func ParseFeature(name string) (Features, bool) {
	n := strings.TrimSpace(name)
	if len(n) > maxNameLen {
		return 0, false
	}
	var up [maxNameLen]byte
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c >= 0x80 {
			return 0, false // no Unicode case folding: "ſ" is not "S"
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	n = string(up[:len(n)])
	if rest, ok := strings.CutPrefix(n, "BIT "); ok {
		b, ok := parseBitNumber(rest)
		if !ok {
			return 0, false
		}
		return Bit(b), true
	}
	for _, p := range bitPrefixes {
		if rest, ok := strings.CutPrefix(n, p); ok {
			n = rest
			break
		}
	}
	for i, s := range names {
		if s != "" && s == n {
			return Bit(uint(i)), true
		}
	}
	return 0, false
}

// parseBitNumber parses N of "bit N": 0 to 63, decimal digits only, no
// sign and no leading zero (the way BitName prints it).
func parseBitNumber(s string) (uint, bool) {
	if len(s) == 0 || len(s) > 2 || (len(s) == 2 && s[0] == '0') {
		return 0, false
	}
	n := uint(0)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint(s[i]-'0')
	}
	return n, n < 64
}

// maxWordLen bounds the text ParseFeatures reads: every bit by its
// longest name joined with "|" takes under 1 KiB.
const maxWordLen = 4096

// ParseFeatures is the inverse of Features.String: "0", or names that
// ParseFeature takes joined with "|" ("CSUM|GUEST_TSO4|bit 58"). An empty
// name, an unknown name or text over 4 KiB is an error that wraps
// ErrInvalid and names the problem.
func ParseFeatures(s string) (Features, error) {
	if len(s) > maxWordLen {
		return 0, fmt.Errorf("virtio: a feature list of %d bytes is too long (at most %d): %w", len(s), maxWordLen, ErrInvalid)
	}
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	var f Features
	for name := range strings.SplitSeq(s, "|") {
		b, ok := ParseFeature(name)
		if !ok {
			return 0, fmt.Errorf("virtio: %q is not a feature name (names as in virtio_net.h without VIRTIO_NET_F_, e.g. GUEST_TSO4, "+
				"or \"bit N\" with N from 0 to 63): %w", name, ErrInvalid)
		}
		f |= b
	}
	return f, nil
}
