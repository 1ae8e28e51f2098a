package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultCacheDir is $NETCTL_VM_CACHE, or .cache/vm next to the go.mod of
// the module the current directory is in.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("NETCTL_VM_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "vm"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vm: no go.mod above the current directory; set NETCTL_VM_CACHE to a cache directory")
		}
		dir = parent
	}
}

// lockDir takes an exclusive lock on dir/.lock so that two harness
// processes (two VMs started at once) do not download or build the same
// thing twice. The returned function releases it.
func lockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("vm: lock %s: %w", dir, err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}
