package macvtap

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/virtio"
)

func TestOffloadsString(t *testing.T) {
	for _, c := range []struct {
		o    Offloads
		want string
	}{
		{0, "none"},
		{OffloadCSUM | OffloadTSO4 | OffloadTSO6, "csum|tso4|tso6"},
		{OffloadAll, "csum|tso4|tso6|tso_ecn|ufo|uso4|uso6"},
		{OffloadCSUM | 0x80, "csum|0x80"},
	} {
		if got := c.o.String(); got != c.want {
			t.Errorf("%#x: %q, want %q", uint32(c.o), got, c.want)
		}
		if c.o&^OffloadAll == 0 {
			if back, err := ParseOffloads(c.want); err != nil || back != c.o {
				t.Errorf("ParseOffloads(%q) = %v, %v", c.want, back, err)
			}
		}
	}
	if _, err := ParseOffloads("csum,gso"); err == nil || !strings.Contains(err.Error(), "use csum") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestOffloadsFor(t *testing.T) {
	all := virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN | virtio.NetGuestUFO |
		virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	for _, c := range []struct {
		name    string
		acked   virtio.Features
		want    Offloads
		dropped []virtio.Features
	}{
		{"everything", all | virtio.NetHostTSO4 | virtio.Version1, OffloadAll, nil},
		{"nothing without GUEST_CSUM", all &^ virtio.NetGuestCsum, 0,
			[]virtio.Features{virtio.NetGuestTSO4, virtio.NetGuestTSO6, virtio.NetGuestECN, virtio.NetGuestUFO, virtio.NetGuestUSO4, virtio.NetGuestUSO6}},
		{"csum only", virtio.NetGuestCsum, OffloadCSUM, nil},
		{"tso4", virtio.NetGuestCsum | virtio.NetGuestTSO4, OffloadCSUM | OffloadTSO4, nil},
		{"ecn needs tso", virtio.NetGuestCsum | virtio.NetGuestECN, OffloadCSUM, []virtio.Features{virtio.NetGuestECN}},
		{"uso4 alone", virtio.NetGuestCsum | virtio.NetGuestUSO4, OffloadCSUM, []virtio.Features{virtio.NetGuestUSO4}},
		{"uso6 alone", virtio.NetGuestCsum | virtio.NetGuestUSO6, OffloadCSUM, []virtio.Features{virtio.NetGuestUSO6}},
		{"host features do not matter", virtio.NetHostTSO4 | virtio.NetHostUSO | virtio.NetCsum, 0, nil},
	} {
		d := OffloadsFor(c.acked)
		if d.Offloads != c.want {
			t.Errorf("%s: %v, want %v", c.name, d.Offloads, c.want)
		}
		if len(d.Dropped) != len(c.dropped) {
			t.Errorf("%s: dropped %v, want %v", c.name, d.Dropped, c.dropped)
		}
		for _, f := range c.dropped {
			if d.Dropped[f] == "" {
				t.Errorf("%s: no reason for %v", c.name, f)
			}
		}
		// The kernel's rules: nothing without CSUM, ECN only with TSO,
		// USO4 and USO6 together.
		o := d.Offloads
		if o != 0 && o&OffloadCSUM == 0 || o&OffloadTSOECN != 0 && o&(OffloadTSO4|OffloadTSO6) == 0 ||
			(o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0) {
			t.Errorf("%s: %v breaks the kernel's rules", c.name, o)
		}
	}
}

func FuzzOffloadsFor(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(0xffffffffffffffff))
	f.Fuzz(func(t *testing.T, v uint64) {
		o := OffloadsFor(virtio.Features(v)).Offloads
		if o != 0 && o&OffloadCSUM == 0 || o&OffloadTSOECN != 0 && o&(OffloadTSO4|OffloadTSO6) == 0 ||
			(o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0) || o&^OffloadAll != 0 {
			t.Fatalf("%#x -> %v breaks the kernel's rules", v, o)
		}
	})
}
