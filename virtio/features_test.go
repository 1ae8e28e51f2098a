package virtio

import (
	"testing"

	"github.com/netctl/netctl/internal/linux"
)

func TestFeaturesString(t *testing.T) {
	for _, c := range []struct {
		f    Features
		want string
	}{
		{0, "0"},
		{linux.VHOST_NET_FEATURES_6_12, "MRG_RXBUF|NOTIFY_ON_EMPTY|LOG_ALL|ANY_LAYOUT|INDIRECT_DESC|EVENT_IDX|VERSION_1|ACCESS_PLATFORM|RING_RESET"},
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
