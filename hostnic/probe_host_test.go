package hostnic

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
)

// TestHostProbeKeepsTapOffloadsPerBoot: Real.Probe with a CacheDir
// probes the tap's offloads on a scratch tap once and keeps them for this
// boot; the next Probe takes them from there (shown by planting a smaller
// set under this boot's id: it is what Probe returns); a cache of another
// boot, or one naming an offload netctl does not know, is probed anew and
// replaced.
func TestHostProbeKeepsTapOffloadsPerBoot(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	h := Real{CacheDir: dir}
	d, err := h.Probe(context.Background(), ProbeSpec{})
	if err != nil || !d.Tap.Available || len(d.Tap.Offloads) < 2 {
		t.Fatalf("first probe: %+v, %v", d.Tap, err)
	}
	probed := strings.Join(d.Tap.Offloads, " ")
	path := filepath.Join(dir, "cache", tapCacheName+".json")
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `"csum"`) {
		t.Fatalf("the cache after the first probe: %q, %v", b, err)
	}
	boot, err := state.BootID()
	if err != nil {
		t.Fatal(err)
	}
	plant := func(bootID string, offloads ...string) {
		v, _ := json.Marshal(map[string]any{"boot_id": bootID, "value": map[string]any{"available": true, "offloads": offloads}})
		if err := os.WriteFile(path, v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plant(boot, "csum")
	if d, err := h.Probe(context.Background(), ProbeSpec{}); err != nil || strings.Join(d.Tap.Offloads, " ") != "csum" {
		t.Errorf("with this boot's cache: %+v, %v (want the cached csum alone)", d.Tap, err)
	}
	for _, bad := range []struct {
		boot     string
		offloads []string
	}{{"00000000-0000-4000-8000-000000000000", []string{"csum"}}, {boot, []string{"csum", "warp"}}} {
		plant(bad.boot, bad.offloads...)
		if d, err := h.Probe(context.Background(), ProbeSpec{}); err != nil || strings.Join(d.Tap.Offloads, " ") != probed {
			t.Errorf("cache %+v: %+v, %v (want probed anew: %s)", bad, d.Tap, err, probed)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), boot) || strings.Contains(string(b), "warp") {
			t.Errorf("cache %+v not replaced: %s", bad, b)
		}
	}
}
