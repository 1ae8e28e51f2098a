package hook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/netctl/netctl/internal/errs"
)

// checkTrusted refuses a host config that a user other than root (or
// the user this process runs as) can write or replace: the hook runs as
// root for libvirtd, and the config names the log file it appends to, the
// taps' owner and where vdpa devices are published. f is the opened file
// (checked by fstat, so a swap after the open does not matter); the
// directories from path's and from its target's parent up to / must be
// trusted's and not writable by group or others unless sticky (/tmp),
// and a symlink at path must be trusted's. Nothing here follows input
// other than the path the operator (or NETCTL_HOOK_CONFIG) names.
func checkTrusted(path string, f *os.File) error {
	return checkTrustedFile("hook config", path, f)
}

// checkTrustedFile is checkTrusted for any file the hook reads as root
// and acts on (what names it in the messages: "hook config", "plan").
func checkTrustedFile(what, path string, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s %s is not a regular file (%s): name the %s file itself: %w", what, path, st.Mode().Type(), what, errs.ErrInvalid)
	}
	if !trusted(st) {
		return fmt.Errorf("%s %s belongs to another user, and the hook runs as root: chown root %s: %w", what, path, path, errs.ErrInvalid)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s %s is writable by group or others (%s), and the hook runs as root: chmod go-w %s: %w", what, path, st.Mode().Perm(), path, errs.ErrInvalid)
	}
	if lst, err := os.Lstat(path); err == nil && lst.Mode()&os.ModeSymlink != 0 && !trusted(lst) {
		return fmt.Errorf("%s %s is a symlink of another user, and the hook runs as root: replace it with root's file: %w", what, path, errs.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	dirs := []string{filepath.Dir(abs)}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		dirs = append(dirs, filepath.Dir(r))
	}
	if err := trustedDirs(dirs...); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// trusted says whether st belongs to root or to the user this process
// runs as.
func trusted(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && trustedUID(s.Uid)
}

// trustedDirs refuses a directory among dirs and their parents up to /
// that belongs to another user, or that group or others can write
// without the sticky bit (/tmp): whoever can write it can replace what
// the hook reads or writes there.
func trustedDirs(dirs ...string) error {
	for _, d := range dirs {
		for {
			st, err := os.Stat(d)
			if err != nil {
				return err
			}
			if !trusted(st) {
				return fmt.Errorf("directory %s belongs to another user, who could replace what is in it, and the hook runs as root: chown root %s: %w", d, d, errs.ErrInvalid)
			}
			if st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
				return fmt.Errorf("directory %s is writable by group or others (%s), who could replace what is in it, and the hook runs as root: chmod go-w %s: %w", d, st.Mode().Perm(), d, errs.ErrInvalid)
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return nil
}

// CheckTrustedExecutable refuses an executable that a user other than
// root (or this process's user) could replace or rewrite: libvirtd runs
// the hook as root at every domain start, so the installed script must
// run only what root controls. path is absolute with its symlinks
// resolved; the file must be trusted's and not writable by group or
// others, and every directory from its own up to / trusted's and not
// writable by group or others (a sticky directory such as /tmp is no
// exception here: the script names the binary by path, and a sticky
// directory lets its owner, any user, replace it).
func CheckTrustedExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !trusted(st) {
		return fmt.Errorf("%s belongs to another user, who could rewrite it, and libvirtd runs the hook as root: install a root-owned netctl (chown root %s): %w", path, path, errs.ErrInvalid)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (%s), and libvirtd runs the hook as root: chmod go-w %s: %w", path, st.Mode().Perm(), path, errs.ErrInvalid)
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !trusted(st) {
			return fmt.Errorf("directory %s belongs to another user, who could replace the netctl in it, and libvirtd runs the hook as root: install netctl in root's directory (/usr/local/sbin): %w", d, errs.ErrInvalid)
		}
		if st.Mode().Perm()&0o022 != 0 && (st.Mode()&os.ModeSticky == 0 || d == filepath.Dir(path)) {
			return fmt.Errorf("directory %s is writable by group or others (%s), who could replace the netctl in it, and libvirtd runs the hook as root: install netctl in root's directory (/usr/local/sbin): %w", d, st.Mode().Perm(), errs.ErrInvalid)
		}
		if d == "/" {
			return nil
		}
	}
}

// CheckTrustedDir refuses a directory the hook keeps its records in (the
// run dir) that a user other than root (or this process's user) could
// write or replace: the hook deletes the taps and vdpa devices its
// records name, so a record planted there would have root delete any
// of them. dir itself, if it exists, must be trusted's and writable by
// no one else (sticky or not: whoever can create in it can plant a
// record); every existing directory above it must be trusted's and not
// writable by group or others unless sticky (/tmp). A part of dir that
// does not exist yet is made by the hook (0700).
func CheckTrustedDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("run dir %s: use an absolute path: %w", dir, errs.ErrInvalid)
	}
	d := filepath.Clean(dir)
	for {
		st, err := os.Stat(d)
		if err == nil {
			if d == filepath.Clean(dir) {
				if !trusted(st) {
					return fmt.Errorf("run dir %s belongs to another user, who could plant records in it, and the hook runs as root: chown root %s: %w", d, d, errs.ErrInvalid)
				}
				if st.Mode().Perm()&0o022 != 0 {
					return fmt.Errorf("run dir %s is writable by group or others (%s), who could plant records in it, and the hook runs as root: chmod go-w %s: %w", d, st.Mode().Perm(), d, errs.ErrInvalid)
				}
			}
			if err := trustedDirs(d); err != nil {
				return fmt.Errorf("run dir %s: %w", dir, err)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("run dir %s: %w", dir, err)
		}
		up := filepath.Dir(d)
		if up == d {
			return nil
		}
		d = up
	}
}
