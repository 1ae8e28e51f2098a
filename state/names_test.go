package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRecordNamesUnambiguous: ids and VM names may both hold '.', so with
// KEY.ID.json VM "a" with id "b.net1" and VM "a.b" with id "net1" shared
// one file: the second Save overwrote the first, and Load of either
// returned whichever was written last (before the fix: Load("a",
// "b.net1") returned VM "a.b"'s record).
func TestRecordNamesUnambiguous(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := sample(), sample()
	a.VM, a.QMP, a.ID = "a", "/run/a.qmp", "b.net1"
	b.VM, b.QMP, b.ID = "a.b", "/run/ab.qmp", "net1"
	for _, n := range []*NIC{a, b} {
		if err := s.Save(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []*NIC{a, b} {
		got, err := s.Load(KeyFor(want.VM, want.QMP), want.ID)
		if err != nil || got.VM != want.VM || got.ID != want.ID {
			t.Errorf("Load(%q, %q) = %+v, %v; want VM %q's record", KeyFor(want.VM, want.QMP), want.ID, got, err, want.VM)
		}
	}
	all, bad, err := s.List("")
	if err != nil || len(bad) != 0 || len(all) != 2 {
		t.Errorf("List: %d records, bad %v, err %v; want both", len(all), bad, err)
	}
	if err := s.Remove(KeyFor(a.VM, a.QMP), a.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(KeyFor(b.VM, b.QMP), b.ID); err != nil || got.VM != b.VM {
		t.Errorf("removing a's record took b's: %+v, %v", got, err)
	}
}

// TestKeyOfVMLiteralNotHash: a name that is not file-safe is keyed
// "x-" + its digest; before the fix, a VM literally named that (any user
// can compute the digest of another VM's name) had the same key, so the
// two shared records, locks and hook records.
func TestKeyOfVMLiteralNotHash(t *testing.T) {
	for _, key := range []string{VMKey("web 1"), VMKey(""), KeyFor("", "/run/web1.qmp")} {
		if VMKey(key) == key {
			t.Errorf("a VM named %q has the key %q, which is also the key of another VM", key, key)
		}
	}
}

// TestLoadChecksWhatItRead: a file at a record's path that holds another
// VM's record (an old-format file, or one put there by hand) is not
// returned as if it were the record asked for.
func TestLoadChecksWhatItRead(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other := sample()
	other.VM, other.QMP, other.ID = "a.b", "/run/ab.qmp", "net1"
	b, _ := json.Marshal(other)
	// The old format's name for VM "a", id "b.net1" is the same file.
	if err := os.WriteFile(filepath.Join(s.Dir, "nics", "a.b.net1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(VMKey("a"), "b.net1"); err == nil {
		t.Errorf("Load(a, b.net1) returned VM %q id %q's record", got.VM, got.ID)
	} else if !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(a, b.net1): %v; want ErrNotFound", err)
	}
	// The file is VM a.b's, under the old format: still found for it.
	if got, err := s.Load(VMKey("a.b"), "net1"); err != nil || got.VM != "a.b" {
		t.Errorf("Load(a.b, net1) of an old-format file: %+v, %v", got, err)
	}
	// Removing a's (absent) record leaves a.b's file alone.
	if err := s.Remove(VMKey("a"), "b.net1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "nics", "a.b.net1.json")); err != nil {
		t.Errorf("Remove(a, b.net1) removed a.b's record: %v", err)
	}
	// Saving a.b's record again replaces the old-format file: one record.
	if err := s.Save(other); err != nil {
		t.Fatal(err)
	}
	if all, bad, _ := s.List(""); len(all) != 1 || len(bad) != 0 {
		t.Errorf("after re-saving an old-format record: %d records, bad %v; want 1", len(all), bad)
	}
}

// TestLoadDomainChecksName: a hook record file holding another domain's
// record is not returned as this domain's.
func TestLoadDomainChecksName(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	victim := "web 1"
	d := &Domain{Schema: DomainSchema, Name: "x-" + digest(victim), Status: DomainPrepared}
	if err := s.SaveDomain(d); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadDomain(victim); err == nil {
		t.Errorf("LoadDomain(%q) returned domain %q's record", victim, got.Name)
	}
	if err := s.RemoveDomain(victim); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadDomain(d.Name); err != nil {
		t.Errorf("RemoveDomain(%q) removed %q's record: %v", victim, d.Name, err)
	}
}
