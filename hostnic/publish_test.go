package hostnic

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestPublish: Publish makes the directory and the symlink and never
// replaces what is there; Unpublish removes only a link that still
// points at the node netctl published.
func TestPublish(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "vdpa")
	link := filepath.Join(dir, "netctl-v1")
	if err := CheckUnpublished(link); err != nil {
		t.Fatalf("CheckUnpublished of nothing: %v", err)
	}
	if err := Publish(link, "/dev/vhost-vdpa-3"); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(link); err != nil || got != "/dev/vhost-vdpa-3" {
		t.Fatalf("published %q, %v", got, err)
	}
	if err := CheckUnpublished(link); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("CheckUnpublished of a published link: %v, want ErrConflict", err)
	}
	if err := Publish(link, "/dev/vhost-vdpa-4"); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("Publish over a link: %v, want ErrConflict", err)
	}
	if got, _ := os.Readlink(link); got != "/dev/vhost-vdpa-3" {
		t.Errorf("Publish over a link changed it to %q", got)
	}
	// Someone else's link (another target), or a file: left alone.
	if err := Unpublish(link, "/dev/vhost-vdpa-4"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("Unpublish of another target removed the link: %v", err)
	}
	file := filepath.Join(dir, "other")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Unpublish(file, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(file); err != nil {
		t.Errorf("Unpublish removed a file: %v", err)
	}
	if err := Unpublish(link, "/dev/vhost-vdpa-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Unpublish left its link: %v", err)
	}
	if err := Unpublish(link, "/dev/vhost-vdpa-3"); err != nil {
		t.Errorf("second Unpublish: %v", err)
	}
}
