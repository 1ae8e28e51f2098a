package nfd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// dot-file of dir of this write's own random name (nfd-worker skips
// dot-files), synced, then renamed over the file, and the directory
// synced. Dot-files of killed writes go once stale (removeStaleTemps). dir is made (0755) when
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
	removeStaleTemps(dir)
	var tmp string
	var err error
	fd := -1
	for i := 0; fd < 0; i++ {
		// A name of this write alone: another writer (a second pod's
		// PID 1 during a rolling update) never shares it, and what
		// someone planted under a name is passed by, not removed.
		var r [8]byte
		rand.Read(r[:])
		tmp = filepath.Join(dir, tempPrefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(r[:]))
		fd, err = unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil && (!errors.Is(err, unix.EEXIST) || i == 9) {
			return fmt.Errorf("nfd: create %s: %w", tmp, err)
		}
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

// tempPrefix starts the dot-files Write renames over FileName.
const tempPrefix = "." + FileName + ".tmp-"

// staleAfter is how old a dot-file of Write's must be to be taken for
// the leftover of a killed write.
const staleAfter = 10 * time.Minute

// removeStaleTemps removes what killed writes left: Write's dot-files
// that are regular files of this user, unchanged for staleAfter (a live
// write renames its own within a second). Anything else of that name is
// someone else's and stays.
func removeStaleTemps(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		var st unix.Stat_t
		p := filepath.Join(dir, e.Name())
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() ||
			time.Since(time.Unix(st.Mtim.Unix())) < staleAfter {
			continue
		}
		os.Remove(p)
	}
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
