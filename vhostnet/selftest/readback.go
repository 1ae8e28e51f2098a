package selftest

import (
	"fmt"
	"slices"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
)

// tapFlagNames names the TUNGETIFF flags a tap reports.
var tapFlagNames = []struct {
	bit  uint16
	name string
}{
	{linux.IFF_TUN, "TUN"}, {linux.IFF_TAP, "TAP"}, {linux.IFF_NO_PI, "NO_PI"}, {linux.IFF_VNET_HDR, "VNET_HDR"},
	{linux.IFF_MULTI_QUEUE, "MULTI_QUEUE"}, {linux.IFF_PERSIST, "PERSIST"}, {linux.IFF_NAPI, "NAPI"},
	{linux.IFF_NAPI_FRAGS, "NAPI_FRAGS"}, {linux.IFF_NO_CARRIER, "NO_CARRIER"}, {linux.IFF_ONE_QUEUE, "ONE_QUEUE"},
}

func flagNames(f uint16) []string {
	var ns []string
	for _, n := range tapFlagNames {
		if f&n.bit != 0 {
			ns = append(ns, n.name)
			f &^= n.bit
		}
	}
	if f != 0 {
		ns = append(ns, fmt.Sprintf("%#x", f))
	}
	return ns
}

// tapOffloadFeatures maps the ethtool features TUNSETOFFLOAD turns on in
// a tap to the tap offloads (TUN_F_*) behind them (tun_set_offload).
var tapOffloadFeatures = []struct {
	feature  string
	offloads []string
}{
	{"tx-checksum-ip-generic", []string{"csum"}},
	{"tx-tcp-segmentation", []string{"tso4"}},
	{"tx-tcp6-segmentation", []string{"tso6"}},
	{"tx-tcp-ecn-segmentation", []string{"tso_ecn"}},
	{"tx-udp-segmentation", []string{"uso4", "uso6"}},
}

// tapReadback is what the kernel reports about the test's tap.
type tapReadback struct {
	hdrSize  int      // TUNGETVNETHDRSZ
	flags    []string // TUNGETIFF
	offloads []string // tap offloads, from the ethtool features below
	features []string // the offload features ethtool netlink reports on
}

// readTap asks the kernel about tap: its flags and header size (tun
// ioctls on queue 0) and its offloads (ethtool netlink: tun has no call
// that reads TUNSETOFFLOAD back). It runs in the tap's network namespace.
func readTap(tap *macvtap.Tap) (tapReadback, error) {
	var rb tapReadback
	var err error
	if rb.hdrSize, err = tap.VnetHdrSize(); err != nil {
		return rb, fmt.Errorf("read the header size back (TUNGETVNETHDRSZ): %w", err)
	}
	f, err := tap.Flags()
	if err != nil {
		return rb, fmt.Errorf("read the tap's flags back (TUNGETIFF): %w", err)
	}
	rb.flags = flagNames(f)
	feat, err := macvtap.ReadFeatures(tap.Name())
	if err != nil {
		return rb, fmt.Errorf("read the tap's offloads back: %w", err)
	}
	rb.offloads, rb.features = []string{}, []string{}
	for _, m := range tapOffloadFeatures {
		if feat.Active[m.feature] {
			rb.features = append(rb.features, m.feature)
			rb.offloads = append(rb.offloads, m.offloads...)
		}
	}
	return rb, nil
}

// checkTap compares what was read back with what the selftest set.
func checkTap(rb tapReadback, hdrSize int, offloads []string) error {
	if rb.hdrSize != hdrSize {
		return fmt.Errorf("the tap's virtio-net header reads back as %d bytes, but %d were set (vhost-net's sock_hlen)", rb.hdrSize, hdrSize)
	}
	if !slices.Contains(rb.flags, "VNET_HDR") {
		return fmt.Errorf("the tap's flags read back as %v, without VNET_HDR", rb.flags)
	}
	if !slices.Equal(rb.offloads, offloads) {
		return fmt.Errorf("the tap's offloads read back as %v (ethtool: %v), but %v were set", rb.offloads, rb.features, offloads)
	}
	return nil
}
