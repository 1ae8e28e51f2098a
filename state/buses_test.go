package state

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Buses gives only the buses of attached NICs of this QEMU process, from
// records of this VM under their own names; anything else is passed by.
func TestBuses(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := sample()
	key := base.Key()
	save := func(id, bus string, edit func(*NIC)) {
		n := sample()
		n.ID, n.Netdev = id, "netctl-"+id
		n.Properties = map[string]string{"bus": bus}
		if edit != nil {
			edit(n)
		}
		if err := s.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	save("net1", "rp1", nil)
	save("net2", "rp2", nil)
	save("old", "rp3", func(n *NIC) { n.QEMUStart++ })                // an earlier QEMU process
	save("going", "rp4", func(n *NIC) { n.Status = StatusDetaching }) // not attached
	save("other", "rp5", func(n *NIC) { n.VM = "web2" })              // another VM
	save("nobus", "", func(n *NIC) { n.Properties = nil })            // QEMU chose
	dir := filepath.Join(s.Dir, "nics")
	b, err := os.ReadFile(filepath.Join(dir, recordName(key, "net1")))
	if err != nil {
		t.Fatal(err)
	}
	// net1's record under another id's name, garbage, an old-format name.
	for name, data := range map[string][]byte{
		recordName(key, "net9"):    b,
		recordName(key, "junk"):    []byte("{not json"),
		legacyName(key, "net7"):    b,
		recordName(key, "huge"):    make([]byte, MaxRecordSize+1),
		"." + recordName(key, "x"): b,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Buses(key, base.QEMUPID, base.QEMUStart)
	want := map[string]string{"net1": "rp1", "net2": "rp2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Buses = %v, want %v", got, want)
	}
	if got := (&Store{Dir: filepath.Join(t.TempDir(), "none")}).Buses(key, 1, 1); len(got) != 0 {
		t.Fatalf("no directory: %v", got)
	}
}
