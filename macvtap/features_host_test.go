package macvtap_test

import (
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostOffloadsReadBackThroughEthtool: what SetOffloads sets shows up in
// the device features ethtool -k prints.
func TestHostOffloadsReadBackThroughEthtool(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlft0", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	for _, c := range []struct {
		o       macvtap.Offloads
		on, off []string
	}{
		{0, nil, []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-udp-segmentation"}},
		{macvtap.OffloadCSUM | macvtap.OffloadTSO4, []string{"tx-checksum-ip-generic", "tx-tcp-segmentation"},
			[]string{"tx-tcp6-segmentation", "tx-udp-segmentation"}},
		{macvtap.OffloadCSUM | macvtap.OffloadTSO6 | macvtap.OffloadUSO4 | macvtap.OffloadUSO6,
			[]string{"tx-tcp6-segmentation", "tx-udp-segmentation"}, []string{"tx-tcp-segmentation"}},
	} {
		if err := tap.SetOffloads(c.o); err != nil {
			t.Fatal(err)
		}
		f, err := macvtap.ReadFeatures(tap.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.on {
			if !f.Active[n] {
				t.Errorf("offloads %v: %s is off (on: %v)", c.o, n, f.On())
			}
		}
		for _, n := range c.off {
			if f.Active[n] {
				t.Errorf("offloads %v: %s is on", c.o, n)
			}
		}
	}
	lowerVeth(t, "nctlfv0")
	f, err := macvtap.ReadFeatures("nctlfv0")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Active["tx-scatter-gather"] || !f.Changeable["rx-gro"] {
		t.Errorf("veth features: on %v", f.On())
	}
	if _, err := macvtap.ReadFeatures("nosuchdev0"); err == nil {
		t.Error("features of a missing device")
	}
}
