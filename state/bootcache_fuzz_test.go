package state

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// cachedTap has the shape of what attach keeps in the boot cache (the
// probed tap of policy/host.Tap: available, offloads, error).
type cachedTap struct {
	Available bool     `json:"available"`
	Offloads  []string `json:"offloads,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// FuzzLoadBootCache: a boot cache file (/run/netctl/cache/NAME.json) is
// outside input. Seeds: what SaveBootCache writes for the tap this host's
// kernel probed (csum, tso4, tso6, tso_ecn, ufo, uso4, uso6: netctl probe
// on the development machine, policy/testdata/probe-host-root.json), one
// from another boot, and broken ones. No panic, no error for a bad file
// (it is only not used), allocation bounded; a value that is used saves
// and loads back to itself.
func FuzzLoadBootCache(f *testing.F) {
	dir := f.TempDir()
	saved := bootIDFile
	bootIDFile = filepath.Join(dir, "boot_id")
	f.Cleanup(func() { bootIDFile = saved })
	const id = "0f0e0d0c-0b0a-4908-8706-050403020100"
	if err := os.WriteFile(bootIDFile, []byte(id+"\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "run"))
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(s.Dir, "cache", "tap.json")
	if err := s.SaveBootCache("tap", cachedTap{Available: true, Offloads: []string{"csum", "tso4", "tso6", "tso_ecn", "ufo", "uso4", "uso6"}}); err != nil {
		f.Fatal(err)
	}
	real, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add([]byte(`{"boot_id":"1f0e0d0c-0b0a-4908-8706-050403020100","value":{"available":true}}`))
	f.Add([]byte(`{"boot_id":"` + id + `","value":{"available":"yes"}}`))
	f.Add([]byte(`{"boot_id":"` + id + `","value":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var v cachedTap
		var ok bool
		var err error
		fuzzalloc.Check(t, len(b), func() { ok, err = s.LoadBootCache("tap", &v) })
		if err != nil {
			t.Fatalf("a bad cache file is an error (%v), not a miss", err)
		}
		if !ok {
			return
		}
		if len(b) > MaxBootCache {
			t.Fatalf("used a %d-byte file", len(b))
		}
		if err := s.SaveBootCache("tap", v); err != nil {
			t.Fatal(err)
		}
		var v2 cachedTap
		if ok, err := s.LoadBootCache("tap", &v2); !ok || err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("round trip %+v -> %+v (%v, %v)", v, v2, ok, err)
		}
	})
}
