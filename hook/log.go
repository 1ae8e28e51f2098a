package hook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
)

// OpenLog opens the hook's log file path for appending, creating it
// (0640) and its directory (0755) when missing. The hook runs as root,
// so it refuses what someone else could have planted there: a symlink at
// path (O_NOFOLLOW), anything but a regular file (a FIFO would block the
// hook, and with it libvirtd's domain start), a file of another user, and
// a directory on the way that another user owns or can write (without
// the sticky bit). The caller owns the returned file and closes it.
func OpenLog(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("log %s: use an absolute path: %w", path, errs.ErrInvalid)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	if err := trustedDirs(dir, real); err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	// O_NONBLOCK: a FIFO opens at once (and is refused below) instead
	// of waiting for a reader; a regular file ignores it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o640)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("log %s is a symlink, which the hook (root) does not follow: remove it, or name the real file in \"log\": %w", path, errs.ErrInvalid)
		}
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("log %s is a %s, not a regular file: remove it: %w", path, st.Mode().Type(), errs.ErrInvalid)
	} else if err == nil && !trusted(st) {
		err = fmt.Errorf("log %s belongs to another user: chown root %s, or remove it: %w", path, path, errs.ErrInvalid)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
