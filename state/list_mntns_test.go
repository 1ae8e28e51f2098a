package state

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// With 16 records or more List reads them on other goroutines, which run
// on other OS threads, through a descriptor of the directory the caller
// opened: a caller whose locked thread is in a mount namespace of its own
// (as testenv.Host and macvtap's probe make) still reads its own records.
// (Reading them by path, each was ENOENT, reported bad.)
func TestHostListFromThreadMountNamespace(t *testing.T) {
	testenv.Host(t) // root; this thread in mount and network namespaces of its own
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		saveNth(t, s, i, nil)
	}
	nics, bad, err := s.List(sample().Key())
	if err != nil || len(bad) != 0 || len(nics) != 16 {
		t.Fatalf("List from a thread in its own mount namespace: %d records, bad %v, %v", len(nics), bad, err)
	}
}
