package probe

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

// TestVMProbeMatchesKernel: the probe finds what each VM kernel is known to
// have: USO and the vdpa family on 6.12 only.
func TestVMProbeMatchesKernel(t *testing.T) {
	k := testenv.VM(t)
	r, err := Probe([]string{"lo"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"6.12": "0x1033d008000", "6.1": "0x33d008000"}[k.Name]
	if !r.VhostNet.Available || r.VhostNet.FeaturesHex != want || r.VhostNet.MaxMemRegions != 64 {
		t.Errorf("vhost-net %+v, want available with features %s", r.VhostNet, want)
	}
	if r.VhostNet.ForkFromOwner != (k.Name == "6.12") {
		t.Errorf("fork-from-owner control %v on %s", r.VhostNet.ForkFromOwner, k.Name)
	}
	uso := slices.Contains(r.Tap.Offloads, "uso4") && slices.Contains(r.Tap.Offloads, "uso6")
	if !r.Tap.Available || uso != k.Has("tun_uso") || !slices.Contains(r.Tap.Offloads, "tso4") {
		t.Errorf("tap %+v on %s (USO expected: %v)", r.Tap, k.Name, k.Has("tun_uso"))
	}
	if !r.Macvtap.Available {
		t.Errorf("macvtap %+v", r.Macvtap)
	}
	if r.VDPA.Available != k.Has("vdpa") {
		t.Errorf("vdpa %+v on %s", r.VDPA, k.Name)
	}
	if k.Has("vdpa") && !slices.Contains(r.VDPA.MgmtDevs, "vduse") {
		t.Errorf("vdpa management devices %v, want vduse", r.VDPA.MgmtDevs)
	}
	if !k.Has("vdpa") && !strings.Contains(r.VDPA.Error, "no vdpa support") {
		t.Errorf("vdpa error %q", r.VDPA.Error)
	}
	if !r.ZeroCopy.Loaded || r.ZeroCopy.Enabled {
		t.Errorf("zero-copy %+v", r.ZeroCopy)
	}
	if _, ok := r.Devices["lo"]; !ok {
		t.Error("no features for --dev lo")
	}
	// The JSON keys scripts rely on.
	b, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, path := range [][]string{{"kernel"}, {"vhost_net", "available"}, {"vhost_net", "features"}, {"tap", "offloads"},
		{"vdpa", "available"}, {"vdpa", "mgmtdevs"}, {"zerocopy", "enabled"}} {
		var cur any = m
		for _, p := range path {
			cur = cur.(map[string]any)[p]
		}
		if cur == nil {
			t.Errorf("JSON lacks %s", strings.Join(path, "."))
		}
	}
	t.Logf("kernel %s: vhost-net %s, tap offloads %v, vdpa %v", k.Name, r.VhostNet.FeaturesHex, r.Tap.Offloads, r.VDPA.Available)
}
