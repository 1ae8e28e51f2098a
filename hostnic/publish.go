package hostnic

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/netctl/netctl/internal/errs"
)

// A vdpa device is published as a symlink to its /dev/vhost-vdpa-N under
// netctl's vdpa directory: the path a libvirt domain's <source dev>
// names, stable across the kernel's numbering.

// CheckUnpublished refuses a published path that exists already (netctl
// removes its own before it publishes again).
func CheckUnpublished(link string) error {
	if _, err := os.Lstat(link); err == nil {
		return fmt.Errorf("%s exists and netctl did not publish it for this domain: remove it, or name another vdpa device in <source dev>: %w", link, errs.ErrConflict)
	}
	return nil
}

// Publish makes link a symlink to vhost, creating its directory; an
// existing link is never replaced.
func Publish(link, vhost string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("publish %s: %w", link, err)
	}
	if err := os.Symlink(vhost, link); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("publish %s: it exists and netctl did not make it: remove it: %w", link, errs.ErrConflict)
		}
		return fmt.Errorf("publish %s: %w", link, err)
	}
	return nil
}

// Unpublish removes link if it still points at vhost; anything else
// there is not netctl's and is left alone.
func Unpublish(link, vhost string) error {
	t, err := os.Readlink(link)
	if err != nil || t != vhost {
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", link, err)
	}
	return nil
}
