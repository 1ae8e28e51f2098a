package virtio

import (
	"errors"
	"strings"
	"testing"
)

// vhostNet612 is what /dev/vhost-net reports on Linux 6.12.
const vhostNet612 = Features(0x1033d008000)

func TestFeaturesString(t *testing.T) {
	for _, c := range []struct {
		f    Features
		want string
	}{
		{0, "0"},
		{vhostNet612, "MRG_RXBUF|NOTIFY_ON_EMPTY|LOG_ALL|ANY_LAYOUT|INDIRECT_DESC|EVENT_IDX|VERSION_1|ACCESS_PLATFORM|RING_RESET"},
		{NetGuestUSO4 | NetGuestUSO6 | NetHostUSO, "GUEST_USO4|GUEST_USO6|HOST_USO"},
		{NetCsum | Bit(4) | Bit(58), "CSUM|bit 4|bit 58"},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("%#x: got %q, want %q", uint64(c.f), got, c.want)
		}
	}
}

func TestEveryNamedBitParses(t *testing.T) {
	for b := uint(0); b < 64; b++ {
		name := BitName(b)
		f, ok := ParseFeature(name)
		if !ok || f != Bit(b) {
			t.Errorf("ParseFeature(%q) = %v, %v; want bit %d", name, f, ok, b)
		}
	}
	if f, ok := ParseFeature("virtio_net_f_guest_tso4"); !ok || f != NetGuestTSO4 {
		t.Errorf("prefixed lower-case name: %v %v", f, ok)
	}
	if _, ok := ParseFeature("TSO"); ok {
		t.Error("TSO is not a virtio feature name")
	}
}

func TestHasAndBits(t *testing.T) {
	f := Version1 | EventIdx
	if !f.Has(Version1) || f.Has(Version1|NetMrgRxbuf) {
		t.Error("Has")
	}
	if got := f.Bits(); len(got) != 2 || got[0] != 29 || got[1] != 32 {
		t.Errorf("Bits = %v", got)
	}
}

// TestParseFeatureStrict: only the spellings BitName prints, with one
// optional header prefix, in any ASCII case.
func TestParseFeatureStrict(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Features
		ok   bool
	}{
		{"GUEST_TSO4", NetGuestTSO4, true},
		{" VIRTIO_NET_F_GUEST_TSO4 ", NetGuestTSO4, true},
		{"virtio_ring_f_event_idx", EventIdx, true},
		{"VHOST_F_LOG_ALL", LogAll, true},
		{"bit 0", Bit(0), true},
		{"bit 63", Bit(63), true},
		{"BIT 4", Bit(4), true},
		{"bit 64", 0, false},
		{"bit +5", 0, false},
		{"bit -1", 0, false},
		{"bit 05", 0, false},
		{"bit ", 0, false},
		{"bit 9999999999999999999999", 0, false},
		{"VIRTIO_NET_F_VIRTIO_F_CSUM", 0, false}, // one prefix only
		{"cſum", 0, false},                       // "ſ" upper-cases to "S" in Unicode
		{"", 0, false},
		{strings.Repeat("A", 1<<20), 0, false},
	} {
		f, ok := ParseFeature(c.in)
		if f != c.want || ok != c.ok {
			in := c.in
			if len(in) > 40 {
				in = in[:40] + "..."
			}
			t.Errorf("ParseFeature(%q) = %v, %v; want %v, %v", in, f, ok, c.want, c.ok)
		}
	}
}

func TestParseFeaturesRoundTrip(t *testing.T) {
	for _, f := range []Features{0, vhostNet612, ^Features(0), NetCsum | Bit(4) | Bit(58)} {
		got, err := ParseFeatures(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFeatures(%q) = %#x, %v; want %#x", f.String(), uint64(got), err, uint64(f))
		}
	}
	for _, bad := range []string{"", "CSUM|", "CSUM||HOST_TSO4", "TSO", strings.Repeat("CSUM|", 1000)} {
		if _, err := ParseFeatures(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseFeatures(%.40q): %v, want an error wrapping ErrInvalid", bad, err)
		}
	}
}
