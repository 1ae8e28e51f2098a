package hook

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestLoadConfigRefusesUntrusted: the hook runs as root for libvirtd, so
// a config that someone other than root (or this user) can write or
// replace could point the log at any file or hand out taps: it is
// refused with a line saying what to fix, and a trusted one loads.
func TestLoadConfigRefusesUntrusted(t *testing.T) {
	write := func(t *testing.T, dirMode, fileMode os.FileMode) (dir, path string) {
		t.Helper()
		dir = filepath.Join(t.TempDir(), "netctl")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(dir, "hook.json")
		if err := os.WriteFile(path, []byte(`{"log": "-"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, fileMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		return dir, path
	}
	t.Run("trusted", func(t *testing.T) {
		_, p := write(t, 0o755, 0o644)
		c, err := LoadConfig(p)
		if err != nil || c.Log != "-" {
			t.Fatalf("LoadConfig = %+v, %v; want the file's config", c, err)
		}
	})
	refused := func(t *testing.T, p, want string) {
		t.Helper()
		_, err := LoadConfig(p)
		if !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("LoadConfig(%s) = %v; want a refusal wrapping ErrInvalid", p, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("LoadConfig(%s) = %v; want it to say %q", p, err, want)
		}
	}
	t.Run("world-writable file", func(t *testing.T) {
		_, p := write(t, 0o755, 0o666)
		refused(t, p, "chmod go-w")
	})
	t.Run("group-writable file", func(t *testing.T) {
		_, p := write(t, 0o755, 0o664)
		refused(t, p, "chmod go-w")
	})
	t.Run("world-writable directory", func(t *testing.T) {
		_, p := write(t, 0o777, 0o644)
		refused(t, p, "chmod go-w")
	})
	t.Run("symlink in a world-writable directory", func(t *testing.T) {
		_, target := write(t, 0o755, 0o644)
		bad := filepath.Join(t.TempDir(), "open")
		if err := os.Mkdir(bad, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(bad, 0o777); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(bad, "hook.json")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		refused(t, link, "chmod go-w")
	})
	t.Run("another user's file", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("needs root to give the file to another user (unit tests run as root here)")
		}
		_, p := write(t, 0o755, 0o644)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		refused(t, p, "chown root")
	})
}
