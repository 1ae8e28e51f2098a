package main

import (
	"fmt"
	"net"
	"sort"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
)

// offloads are the guest's offloads the benchmark turns off: transmit
// checksum, scatter-gather and segmentation (TSO, GSO), and receive
// coalescing: GRO and the virtio-net receive offloads (rx-gro-hw, which
// the virtio-net driver turns into VIRTIO_NET_CTRL_GUEST_OFFLOADS, so the
// host stops sending it GSO frames). Names as ethtool -k prints them.
var offloads = []string{"tx-checksum-ip-generic", "tx-scatter-gather", "tx-tcp-segmentation", "tx-tcp-ecn-segmentation",
	"tx-tcp6-segmentation", "tx-generic-segmentation", "rx-gro", "rx-gro-hw"}

// SetOffloads turns offloads on or off on the NIC with that MAC (those of
// them its driver lets change) and returns the features on afterwards.
// Like ethtool -K DEV tx off sg off tso off gso off gro off rx-gro-hw off.
func SetOffloads(mac string, on bool) ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	dev := ""
	for _, i := range ifs {
		if i.HardwareAddr.String() == mac {
			dev = i.Name
		}
	}
	if dev == "" {
		return nil, fmt.Errorf("no NIC with MAC %s", mac)
	}
	f, err := macvtap.ReadFeatures(dev)
	if err != nil {
		return nil, err
	}
	var change []string
	for _, o := range offloads {
		if f.Changeable[o] {
			change = append(change, o)
		}
	}
	if len(change) == 0 {
		return nil, fmt.Errorf("%s: none of %v can change", dev, offloads)
	}
	if err := setFeatures(dev, change, on); err != nil {
		return nil, err
	}
	if f, err = macvtap.ReadFeatures(dev); err != nil {
		return nil, err
	}
	var now []string
	for _, o := range change {
		if f.Active[o] != on {
			return nil, fmt.Errorf("%s: %s is still %v", dev, o, f.Active[o])
		}
		if f.Active[o] {
			now = append(now, o)
		}
	}
	sort.Strings(now)
	return now, nil
}

// setFeatures sends ETHTOOL_MSG_FEATURES_SET with a verbose bitset of
// the named features (include/uapi/linux/ethtool_netlink.h; Linux 5.6):
// only the features listed change.
func setFeatures(dev string, names []string, on bool) error {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("ethtool: generic netlink: %w", err)
	}
	defer c.Close()
	fam, err := c.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		return fmt.Errorf("ethtool: %w", err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_FEATURES_HEADER, func(nae *netlink.AttributeEncoder) error {
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, dev)
		return nil
	})
	ae.Nested(unix.ETHTOOL_A_FEATURES_WANTED, func(bs *netlink.AttributeEncoder) error {
		bs.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bits *netlink.AttributeEncoder) error {
			for _, n := range names {
				bits.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(bit *netlink.AttributeEncoder) error {
					bit.String(unix.ETHTOOL_A_BITSET_BIT_NAME, n)
					if on {
						bit.Flag(unix.ETHTOOL_A_BITSET_BIT_VALUE, true)
					}
					return nil
				})
			}
			return nil
		})
		return nil
	})
	data, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.ETHTOOL_MSG_FEATURES_SET, Version: unix.ETHTOOL_GENL_VERSION},
		Data:   data,
	}, fam.ID, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return fmt.Errorf("ethtool: set features of %s: %w", dev, err)
	}
	return nil
}
