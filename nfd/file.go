package nfd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
)

// DefaultDir is NFD's local feature directory (nfd-worker's local
// source, featureFilesDir), FileName netctl's file in it.
const (
	DefaultDir = "/etc/kubernetes/node-feature-discovery/features.d"
	FileName   = "netctl"
)

// MaxFileSize is NFD's MaxFeatureFileSize: a larger file is ignored
// whole.
const MaxFileSize = 65536

// Render is the feature file for labels, expiring at expiry (NFD drops
// the labels after it, at its next discovery; zero: no expiry).
func Render(labels []Label, expiry time.Time, now time.Time) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# netctl's node features (netctl nfd write, %s): what netctl probe found on this node.\n", now.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# Rewritten whole at each refresh; edits are lost.\n")
	if !expiry.IsZero() {
		fmt.Fprintf(&b, "# +expiry-time=%s\n", expiry.UTC().Format(time.RFC3339))
	}
	for _, l := range labels {
		if !ValidName(l.Name) || !ValidValue(l.Value) {
			return nil, fmt.Errorf("nfd: %q is not a valid node label: %w", l.String(), errs.ErrInvalid)
		}
		b.WriteString(l.String() + "\n")
	}
	if b.Len() > MaxFileSize {
		return nil, fmt.Errorf("nfd: the feature file would be %d bytes, over NFD's %d (it would ignore it whole): %w", b.Len(), MaxFileSize, errs.ErrInvalid)
	}
	return b.Bytes(), nil
}

// Write puts content in dir/FileName atomically, as NFD asks: into a
// dot-file of dir (nfd-worker skips dot-files), synced, then renamed
// over the file, and the directory synced. dir is made (0755) when
// missing. A FileName in dir that is not a regular file (a directory, a
// symlink someone planted) is refused: netctl replaces only its own
// file.
func Write(dir string, content []byte) error {
	if len(content) > MaxFileSize {
		return fmt.Errorf("nfd: %d bytes, over NFD's %d: %w", len(content), MaxFileSize, errs.ErrInvalid)
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("nfd: directory %q: give an absolute path: %w", dir, errs.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nfd: make NFD's feature directory: %w", err)
	}
	target := filepath.Join(dir, FileName)
	switch st, err := os.Lstat(target); {
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("nfd: %s is a %s, not netctl's feature file: remove it or give another --dir: %w", target, st.Mode().Type(), errs.ErrConflict)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("nfd: %w", err)
	}
	tmp := filepath.Join(dir, "."+FileName+".tmp-"+strconv.Itoa(os.Getpid()))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EEXIST) {
		// A write of an earlier process with this pid that died between
		// create and rename: netctl's own name, remove it and go on.
		if rerr := os.Remove(tmp); rerr != nil {
			return fmt.Errorf("nfd: %w", rerr)
		}
		fd, err = unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	}
	if err != nil {
		return fmt.Errorf("nfd: create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(content)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, target)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("nfd: write %s: %w", target, werr)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Remove deletes netctl's feature file (the node's netctl labels go at
// NFD's next discovery); a missing file is no error, and anything but a
// regular file is left alone.
func Remove(dir string) error {
	target := filepath.Join(dir, FileName)
	st, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("nfd: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("nfd: %s is not a regular file, left alone: %w", target, errs.ErrConflict)
	}
	if err := os.Remove(target); err != nil {
		return fmt.Errorf("nfd: %w", err)
	}
	return nil
}
