package hook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
)

// OpenLog opens the hook's log file path for appending, creating it
// (0640) and its directory (0755) when missing. The hook runs as root,
// so it refuses what someone else could have planted or redirected:
//
//   - the directory is reached from / one component at a time, following
//     a symlink only where root alone can write the directory holding it
//     (so a symlinked /var/log works), so a group that may write an
//     ancestor (Ubuntu's /var/log is root:syslog 0775) can neither plant
//     nor swap in a symlink that points the log elsewhere;
//   - the log's own directory must be root's (or this user's) and not
//     writable by group or others, unless sticky;
//   - the file is opened with O_NOFOLLOW and O_NONBLOCK and must be a
//     regular file of root (or this user) with one link: not a symlink,
//     not a FIFO (which would block the hook, and with it libvirtd's
//     domain start), not a hard link to another file.
//
// The caller owns the returned file and closes it.
func OpenLog(path string) (*os.File, error) {
	if !filepath.IsAbs(path) || filepath.Base(path) == "/" {
		return nil, fmt.Errorf("log %s: use an absolute path of a file: %w", path, errs.ErrInvalid)
	}
	path = filepath.Clean(path)
	dir, name := filepath.Dir(path), filepath.Base(path)
	real := dir
	dfd, err := openDirNoFollow(dir)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	if !trustedUID(st.Uid) {
		return nil, fmt.Errorf("log %s: directory %s belongs to uid %d, who could replace the log, and the hook runs as root: chown root %s: %w", path, real, st.Uid, real, errs.ErrInvalid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return nil, fmt.Errorf("log %s: directory %s is writable by group or others (%#o), who could replace the log, and the hook runs as root: chmod go-w %s: %w", path, real, st.Mode&0o777, real, errs.ErrInvalid)
	}
	// O_NONBLOCK: a FIFO opens at once (and is refused below) instead
	// of waiting for a reader; a regular file ignores it.
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("log %s is a symlink, which the hook (root) does not follow: remove it, or name the real file in \"log\": %w", path, errs.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path) // owns fd from here
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("log %s is not a regular file (mode %#o): remove it: %w", path, st.Mode, errs.ErrInvalid)
	case !trustedUID(st.Uid):
		err = fmt.Errorf("log %s belongs to uid %d: chown root %s, or remove it: %w", path, st.Uid, path, errs.ErrInvalid)
	case st.Nlink != 1:
		err = fmt.Errorf("log %s has %d links (a hard link to another file?): remove it: %w", path, st.Nlink, errs.ErrInvalid)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openDirNoFollow opens the absolute directory p from / one component
// at a time with O_NOFOLLOW, making a missing one (0755). A symlink on the way is followed only where
// the directory holding it is root's (or this user's) and not writable
// by group or others (so /var/log -> /data/log made by root works, and a
// symlink planted in Ubuntu's root:syslog 0775 /var/log does not); at
// most 40 of them. The caller closes the fd.
func openDirNoFollow(p string) (int, error) {
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	at := "/"
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if merr := unix.Mkdirat(fd, c, 0o755); merr == nil || errors.Is(merr, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			var st unix.Stat_t
			if serr := unix.Fstat(fd, &st); serr != nil || !trustedUID(st.Uid) || st.Mode&0o022 != 0 {
				unix.Close(fd)
				return -1, fmt.Errorf("%s is a symlink in %s, which others can write (or another user owns), and the hook runs as root: name the real directory: %w", filepath.Join(at, c), at, errs.ErrInvalid)
			}
			buf := make([]byte, unix.PathMax)
			n, rerr := unix.Readlinkat(fd, c, buf)
			links++
			if rerr != nil || links > 40 {
				unix.Close(fd)
				return -1, fmt.Errorf("%s: not a directory, or too many symlinks: %w", filepath.Join(at, c), errs.ErrInvalid)
			}
			target := string(buf[:n])
			if !filepath.IsAbs(target) {
				target = filepath.Join(at, target)
			}
			// Start again from / with the target and what was left.
			unix.Close(fd)
			rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
			if fd, err = unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return -1, err
			}
			at = "/"
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, &os.PathError{Op: "open", Path: filepath.Join(at, c), Err: err}
		}
		unix.Close(fd)
		fd, at = next, filepath.Join(at, c)
	}
	return fd, nil
}

// trustedUID says whether uid is root or the user this process runs as:
// the one rule for the config, its directories and the log.
func trustedUID(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }
