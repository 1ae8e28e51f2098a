package hook

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
)

// TestReviewConfigFIFODoesNotBlock: the hook loads its config on every
// prepare, started, reconnect and release, before any trust check can
// refuse the file. A FIFO at the config's path (someone who can write
// the config's directory; the trust check would refuse that directory,
// but only after the open) made the open wait for a writer forever, and
// every domain start on the host hang in libvirtd with it. It must be
// refused at once as not a regular file.
func TestReviewConfigFIFODoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hook.json")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadConfig(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("LoadConfig of a FIFO: %v, want a refusal", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("LoadConfig of a FIFO blocks (the hook, and libvirtd's domain start, with it)")
	}
}
