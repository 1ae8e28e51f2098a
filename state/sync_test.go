package state

import (
	"os"
	"testing"
)

// TestSyncs: an attach's records before its last (Create, Stage) are not
// synced; Save syncs the file and its directory, once each.
func TestSyncs(t *testing.T) {
	var synced []string
	old := syncFile
	syncFile = func(f *os.File) error {
		fi, err := f.Stat()
		if err == nil && fi.IsDir() {
			synced = append(synced, "dir")
		} else {
			synced = append(synced, "file")
		}
		return old(f)
	}
	t.Cleanup(func() { syncFile = old })
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := sample()
	n.Status = StatusAttaching
	if err := s.Create(n); err != nil {
		t.Fatal(err)
	}
	if err := s.Stage(n); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 0 {
		t.Fatalf("Create and Stage synced %v", synced)
	}
	if got, err := s.Load(n.Key(), n.ID); err != nil || got.Status != StatusAttaching {
		t.Fatalf("staged record: %+v, %v", got, err)
	}
	n.Status = StatusAttached
	if err := s.Save(n); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || synced[0] != "file" || synced[1] != "dir" {
		t.Fatalf("Save synced %v, want the file then its directory", synced)
	}
}
