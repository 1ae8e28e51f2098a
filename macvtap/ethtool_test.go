package macvtap

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// bitset encodes a verbose ethtool bitset: with nomask, the listed names
// are the set bits; without, each listed bit carries VALUE when set.
func bitset(nomask bool, bits map[string]bool) func(*netlink.AttributeEncoder) error {
	return func(ae *netlink.AttributeEncoder) error {
		if nomask {
			ae.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
		}
		ae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 64)
		ae.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bae *netlink.AttributeEncoder) error {
			i := uint32(0)
			for name, v := range bits {
				bae.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(x *netlink.AttributeEncoder) error {
					x.Uint32(unix.ETHTOOL_A_BITSET_BIT_INDEX, i)
					x.String(unix.ETHTOOL_A_BITSET_BIT_NAME, name)
					if v && !nomask {
						x.Flag(unix.ETHTOOL_A_BITSET_BIT_VALUE, true)
					}
					return nil
				})
				i++
			}
			return nil
		})
		return nil
	}
}

func TestReadFeaturesAgainstFakeFamily(t *testing.T) {
	fam := genetlink.Family{ID: 0x20, Name: unix.ETHTOOL_GENL_NAME, Version: 1}
	var asked string
	c := genltest.Dial(genltest.ServeFamily(fam, func(greq genetlink.Message, _ netlink.Message) ([]genetlink.Message, error) {
		if greq.Header.Command != unix.ETHTOOL_MSG_FEATURES_GET {
			t.Errorf("command %d, want FEATURES_GET", greq.Header.Command)
		}
		ad, _ := netlink.NewAttributeDecoder(greq.Data)
		for ad.Next() {
			if ad.Type() == unix.ETHTOOL_A_FEATURES_HEADER {
				ad.Nested(func(h *netlink.AttributeDecoder) error {
					for h.Next() {
						if h.Type() == unix.ETHTOOL_A_HEADER_DEV_NAME {
							asked = h.String()
						}
					}
					return nil
				})
			}
		}
		if asked == "nodev" {
			return nil, genltest.Error(int(unix.ENODEV))
		}
		ae := netlink.NewAttributeEncoder()
		ae.Nested(unix.ETHTOOL_A_FEATURES_HW, bitset(true, map[string]bool{"tx-tcp-segmentation": true, "rx-gro": true}))
		// A bitset with a mask: listed bits, VALUE on those that are set.
		ae.Nested(unix.ETHTOOL_A_FEATURES_ACTIVE, bitset(false, map[string]bool{
			"tx-tcp-segmentation": true, "rx-gro": false, "tx-checksum-ip-generic": true}))
		b, _ := ae.Encode()
		return []genetlink.Message{{Data: b}}, nil
	}))
	defer c.Close()
	f, err := readFeatures(c, "tap0")
	if err != nil {
		t.Fatal(err)
	}
	if asked != "tap0" {
		t.Errorf("asked for %q", asked)
	}
	if got, want := f.On(), []string{"tx-checksum-ip-generic", "tx-tcp-segmentation"}; !reflect.DeepEqual(got, want) {
		t.Errorf("on %v, want %v", got, want)
	}
	if !f.Changeable["rx-gro"] || f.Changeable["tx-checksum-ip-generic"] || f.Active["rx-gro"] {
		t.Errorf("changeable %v, active %v", f.Changeable, f.Active)
	}
	if _, err := readFeatures(c, "nodev"); err == nil || !contains(err.Error(), `no device "nodev"`) {
		t.Errorf("missing device: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
