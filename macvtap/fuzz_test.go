package macvtap

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// encodeFeatures is parseFeatures' inverse: each known name as a bit of a
// verbose bitset with a mask, VALUE on those that are on.
func encodeFeatures(t *testing.T, f *DeviceFeatures) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	for _, s := range []struct {
		typ uint16
		set map[string]bool
	}{{unix.ETHTOOL_A_FEATURES_HW, f.Changeable}, {unix.ETHTOOL_A_FEATURES_ACTIVE, f.Active}} {
		ae.Nested(s.typ, func(nae *netlink.AttributeEncoder) error {
			nae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, uint32(len(s.set)))
			nae.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bae *netlink.AttributeEncoder) error {
				i := uint32(0)
				for name, on := range s.set {
					bae.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(x *netlink.AttributeEncoder) error {
						x.Uint32(unix.ETHTOOL_A_BITSET_BIT_INDEX, i)
						x.String(unix.ETHTOOL_A_BITSET_BIT_NAME, name)
						if on {
							x.Flag(unix.ETHTOOL_A_BITSET_BIT_VALUE, true)
						}
						return nil
					})
					i++
				}
				return nil
			})
			return nil
		})
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseFeatures: the seeds under testdata/fuzz/FuzzParseFeatures are
// real ETHTOOL_MSG_FEATURES_GET replies: a tap with csum|tso4|tso6|uso and
// lo on Linux 6.18, a tap with csum|tso4|tso6 and a macvtap in the 6.12 VM.
// No input panics, what is decoded is bounded by the
// input, and decode -> encode -> decode gives the same features.
func FuzzParseFeatures(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var df *DeviceFeatures
		var err error
		fuzzalloc.Check(t, len(data), func() { df, err = parseFeatures("dev0", data) })
		if err != nil {
			return
		}
		// Each named bit takes at least 12 bytes (two attribute headers
		// and a name).
		if n := len(df.Active) + len(df.Changeable); n > len(data)/12 {
			t.Fatalf("%d names from %d bytes", n, len(data))
		}
		again, err := parseFeatures("dev0", encodeFeatures(t, df))
		if err != nil {
			t.Fatalf("re-encoded features do not decode: %v", err)
		}
		if !maps.Equal(df.Active, again.Active) || !maps.Equal(df.Changeable, again.Changeable) {
			t.Fatalf("round trip: %v / %v, then %v / %v", df.Active, df.Changeable, again.Active, again.Changeable)
		}
	})
}

// FuzzParseOffloads: seeds are what netctl prints (Offloads.String, the
// selftest's "tap offloads" line, probe's names). No input panics, only
// known flags come out, and String -> ParseOffloads gives them back.
func FuzzParseOffloads(f *testing.F) {
	for _, s := range []string{"csum|tso4|tso6|tso_ecn|ufo|uso4|uso6", "csum tso4 tso6", "none", "csum|tso4", "csum,tso6,uso4,uso6",
		"csum|0x80", "CSUM|TSO4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var o Offloads
		var err error
		fuzzalloc.Check(t, len(s), func() { o, err = ParseOffloads(s) })
		if err != nil {
			if o != 0 {
				t.Fatalf("%q: error %v with flags %v", s, err, o)
			}
			return
		}
		if o&^OffloadAll != 0 {
			t.Fatalf("%q: unknown flags %#x", s, uint32(o))
		}
		back, err := ParseOffloads(o.String())
		if err != nil || back != o {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, o, o.String(), back, err)
		}
	})
}

// FuzzParseDevNumber: seeds are real sysfs dev files (/sys/class/misc/tun,
// /sys/dev/char/1:3, a macvtap's tapN on 6.18 and in the 6.12 VM). No input
// panics; what parses is the kernel's own format, so format(parse(x)) is x.
func FuzzParseDevNumber(f *testing.F) {
	for _, s := range []string{"10:200\n", "1:3\n", "246:1\n", "244:1\n", "4095:1048575\n", "0:0\n"} {
		f.Add([]byte(s))
	}
	// And the running kernel's own dev files, read now.
	live, _ := filepath.Glob("/sys/dev/char/*/dev")
	for _, p := range append([]string{"/sys/class/misc/tun/dev", "/sys/dev/char/1:3/dev"}, live[:min(len(live), 8)]...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var maj, min uint32
		var err error
		fuzzalloc.Check(t, len(b), func() { maj, min, err = parseDevNumber(b) })
		if err != nil {
			return
		}
		if maj > maxMajor || min > maxMinor {
			t.Fatalf("%q: %d:%d does not fit a dev_t", b, maj, min)
		}
		s := formatDevNumber(maj, min)
		if want := strings.TrimSuffix(string(b), "\n") + "\n"; s != want {
			t.Fatalf("%q parsed as %d:%d, which prints as %q", b, maj, min, s)
		}
		if m2, n2, err := parseDevNumber([]byte(s)); err != nil || m2 != maj || n2 != min {
			t.Fatalf("%q: round trip %d:%d, %v", s, m2, n2, err)
		}
	})
}

func TestParseDevNumber(t *testing.T) {
	for _, c := range []struct {
		in       string
		maj, min uint32
		ok       bool
	}{
		{"10:200\n", 10, 200, true},
		{"246:1", 246, 1, true},
		{"4095:1048575\n", 4095, 1048575, true},
		{"4096:0\n", 0, 0, false},
		{"0:1048576\n", 0, 0, false},
		{"010:1\n", 0, 0, false},
		{"+1:2\n", 0, 0, false},
		{"1:2\n\n", 0, 0, false},
		{"1:2:3\n", 0, 0, false},
		{" 1:2\n", 0, 0, false},
		{":\n", 0, 0, false},
		{"\n", 0, 0, false},
		{"", 0, 0, false},
		{"99999999999:1\n", 0, 0, false},
		{strings.Repeat("1", 40), 0, 0, false},
	} {
		maj, min, err := parseDevNumber([]byte(c.in))
		if (err == nil) != c.ok || maj != c.maj || min != c.min {
			t.Errorf("%q: %d:%d, %v", c.in, maj, min, err)
		}
	}
}

// TestParseFeaturesRealReplies: the captured replies decode to what the
// devices had: the offloads set on the taps, and lo's fixed features.
func TestParseFeaturesRealReplies(t *testing.T) {
	for _, c := range []struct {
		file    string
		on, off []string
	}{
		{"tap-6.18", []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-udp-segmentation"}, []string{"loopback"}},
		{"tap-6.12", []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-tcp6-segmentation"}, []string{"tx-udp-segmentation"}},
		{"macvtap-6.12", []string{"tx-scatter-gather"}, []string{"loopback"}},
		{"lo-6.18", []string{"loopback", "tx-checksum-ip-generic"}, []string{"rx-hashing"}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata/fuzz/FuzzParseFeatures", c.file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		lit, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		f, err := parseFeatures(c.file, []byte(lit))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		for _, n := range c.on {
			if !f.Active[n] {
				t.Errorf("%s: %s is off; on: %v", c.file, n, f.On())
			}
		}
		for _, n := range c.off {
			if f.Active[n] {
				t.Errorf("%s: %s is on", c.file, n)
			}
		}
		if len(f.Changeable) == 0 {
			t.Errorf("%s: no changeable features decoded", c.file)
		}
	}
}
