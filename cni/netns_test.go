package cni

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInNetNSNotANamespace: a CNI_NETNS that is a FIFO (whose open
// would block until a writer comes), a regular file, a directory or a
// device is refused at once as no network namespace, and fn never runs.
func TestInNetNSNotANamespace(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, p := range []string{fifo, file, dir, "/dev/null"} {
		done := make(chan error, 1)
		ran := false
		go func() { done <- inNetNS(p, func() error { ran = true; return nil }) }()
		select {
		case err := <-done:
			if !errors.Is(err, errNotNetNS) || ran {
				t.Errorf("%s: %v (fn ran: %v); want errNotNetNS", p, err, ran)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: inNetNS still blocked after 3s", p)
		}
	}
	if err := inNetNS(filepath.Join(dir, "gone"), func() error { return nil }); !errors.Is(err, errNetNSGone) {
		t.Errorf("a missing path: %v; want errNetNSGone", err)
	}
	// Another kind of namespace: refused the same way.
	if err := inNetNS("/proc/self/ns/uts", func() error { return nil }); !errors.Is(err, errNotNetNS) {
		t.Errorf("a UTS namespace: %v; want errNotNetNS", err)
	}
}
