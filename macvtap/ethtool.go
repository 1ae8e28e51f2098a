package macvtap

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// DeviceFeatures are a network device's features under the names ethtool
// -k prints ("tx-checksum-ip-generic", "tx-tcp-segmentation", "rx-gro",
// "tx-udp-segmentation", ...), read through the kernel's ethtool netlink
// family (Linux 5.6+).
type DeviceFeatures struct {
	Device     string
	Active     map[string]bool // on now
	Changeable map[string]bool // ethtool -K can turn it on or off (not "[fixed]")
}

// On lists the active feature names, sorted.
func (f *DeviceFeatures) On() []string {
	var ns []string
	for n, on := range f.Active {
		if on {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	return ns
}

// ReadFeatures reads the features of the named device in the calling
// thread's network namespace (like ethtool -k NAME). It needs no
// privilege: the netlink socket is made by the calling thread, so it is
// in that thread's namespace (a caller that entered another one has its
// goroutine locked to the thread). Naming the namespace (netlink.Config's
// NetNS) would make the socket on a thread that setns()es into it, which
// needs CAP_SYS_ADMIN even for the namespace the caller is in.
func ReadFeatures(name string) (*DeviceFeatures, error) {
	c, err := genetlink.Dial(&netlink.Config{})
	if err != nil {
		return nil, fmt.Errorf("ethtool: generic netlink: %w", err)
	}
	defer c.Close()
	return readFeatures(c, name)
}

func readFeatures(c *genetlink.Conn, name string) (*DeviceFeatures, error) {
	data, err := featuresReply(c, name)
	if err != nil {
		return nil, err
	}
	f, err := parseFeatures(name, data)
	if err != nil {
		return nil, fmt.Errorf("ethtool: features of %s: %w", name, err)
	}
	return f, nil
}

// featuresReply asks for the features of the named device and returns the
// reply's attributes.
func featuresReply(c *genetlink.Conn, name string) ([]byte, error) {
	fam, err := c.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ethtool: this kernel has no ethtool netlink family (it came in Linux 5.6): %w", err)
		}
		return nil, fmt.Errorf("ethtool: %w", err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_FEATURES_HEADER, func(nae *netlink.AttributeEncoder) error {
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, name)
		return nil
	})
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.ETHTOOL_MSG_FEATURES_GET, Version: unix.ETHTOOL_GENL_VERSION},
		Data:   data,
	}, fam.ID, netlink.Request)
	if err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ethtool: no device %q in this network namespace: %w", name, err)
		}
		return nil, fmt.Errorf("ethtool: features of %s: %w", name, err)
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("ethtool: features of %s: %d replies, want 1", name, len(msgs))
	}
	return msgs[0].Data, nil
}

// parseFeatures decodes the attributes of an ETHTOOL_MSG_FEATURES_GET
// reply (verbose bitsets, include/uapi/linux/ethtool_netlink.h): ACTIVE
// into Active, HW into Changeable. Other attributes are skipped; a
// malformed one is an error, never a panic. What it allocates is bounded by
// the size of data.
func parseFeatures(name string, data []byte) (*DeviceFeatures, error) {
	f := &DeviceFeatures{Device: name, Active: map[string]bool{}, Changeable: map[string]bool{}}
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return nil, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_FEATURES_ACTIVE:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeBitset(nad, f.Active) })
		case unix.ETHTOOL_A_FEATURES_HW:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeBitset(nad, f.Changeable) })
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return f, nil
}

// decodeBitset reads a verbose ethtool bitset (ETHTOOL_A_BITSET_*) into
// set: name -> whether the bit is set. Every listed bit is recorded, so
// set also says which names the device knows.
func decodeBitset(ad *netlink.AttributeDecoder, set map[string]bool) error {
	nomask := false
	type bit struct {
		name  string
		value bool
	}
	var bits []bit
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_BITSET_NOMASK:
			nomask = true
		case unix.ETHTOOL_A_BITSET_BITS:
			ad.Nested(func(bad *netlink.AttributeDecoder) error {
				for bad.Next() {
					if bad.Type() != unix.ETHTOOL_A_BITSET_BITS_BIT {
						continue
					}
					var b bit
					bad.Nested(func(x *netlink.AttributeDecoder) error {
						for x.Next() {
							switch x.Type() {
							case unix.ETHTOOL_A_BITSET_BIT_NAME:
								b.name = x.String()
							case unix.ETHTOOL_A_BITSET_BIT_VALUE:
								b.value = true
							}
						}
						return x.Err()
					})
					if b.name != "" { // the kernel sends "" for feature bits that have no name
						bits = append(bits, b)
					}
				}
				return bad.Err()
			})
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	for _, b := range bits {
		set[b.name] = nomask || b.value
	}
	return nil
}
