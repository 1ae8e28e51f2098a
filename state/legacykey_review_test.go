package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLegacyRecordOfRekeyedName: an older netctl keyed VM "x-web" (and
// "sock-web") literally, so its record file is x-web.net1.json; VMKey
// now hashes those names. The record must still be found by Load under
// the VM's key and go away with Remove (before: List showed it, Load said
// there was none and Remove left it, so detach and gc could never finish
// it: gc reported it removed at every run).
func TestLegacyRecordOfRekeyedName(t *testing.T) {
	for _, vm := range []string{"x-web", "sock-web"} {
		s, err := Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		n := sample()
		n.VM, n.QMP, n.ID = vm, "/run/web.qmp", "net1"
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "nics", vm+".net1.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		key := KeyFor(vm, n.QMP)
		if all, bad, _ := s.List(key); len(all) != 1 || len(bad) != 0 {
			t.Fatalf("%s: List(%s): %d records, bad %v; want the old-format one", vm, key, len(all), bad)
		}
		if got, err := s.Load(key, "net1"); err != nil || got.VM != vm {
			t.Errorf("%s: Load(%s, net1) = %v, %v; want the old-format record", vm, key, got, err)
		}
		if err := s.Remove(key, "net1"); err != nil {
			t.Fatal(err)
		}
		if all, _, _ := s.List(""); len(all) != 0 {
			t.Errorf("%s: after Remove(%s, net1) List still has %d record(s)", vm, key, len(all))
		}
	}
}
