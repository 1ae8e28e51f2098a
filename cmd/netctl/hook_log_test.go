package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hook"
)

// TestOpenHookLogRefusesPlanted: the hook appends to its log as root, so
// whoever plants a symlink (to /etc/shadow, say) or a FIFO at the log's
// path, or can write its directory, must not get root to write for them
// or hang it: the log is refused (the hook goes on without one, saying
// so on stderr) and the symlink's target is untouched. A trusted path is
// created 0640 and appended to.
func TestOpenHookLogRefusesPlanted(t *testing.T) {
	t.Run("trusted", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "log", "hook.log")
		for range 2 {
			f, err := openHookLog(&hook.Config{Log: p})
			if err != nil {
				t.Fatalf("openHookLog(%s): %v", p, err)
			}
			f.WriteString("line\n")
			f.Close()
		}
		b, _ := os.ReadFile(p)
		st, _ := os.Stat(p)
		if string(b) != "line\nline\n" || st.Mode().Perm() != 0o640 {
			t.Fatalf("%s holds %q mode %v; want two lines, 0640", p, b, st.Mode().Perm())
		}
	})
	t.Run("root's symlinked directory", func(t *testing.T) {
		d := t.TempDir()
		os.Mkdir(filepath.Join(d, "data"), 0o755)
		os.Symlink("data", filepath.Join(d, "log"))
		f, err := openHookLog(&hook.Config{Log: filepath.Join(d, "log", "netctl", "hook.log")})
		if err != nil {
			t.Fatalf("openHookLog through root's symlink: %v", err)
		}
		f.Close()
		if _, err := os.Stat(filepath.Join(d, "data", "netctl", "hook.log")); err != nil {
			t.Errorf("the log is not where the symlink leads: %v", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		d := t.TempDir()
		victim := filepath.Join(d, "victim")
		os.WriteFile(victim, []byte("root's\n"), 0o600)
		p := filepath.Join(d, "hook.log")
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
		if f, err := openHookLog(&hook.Config{Log: p}); err == nil {
			f.WriteString("attacker's line\n")
			f.Close()
			t.Errorf("openHookLog opened the symlink %s -> %s", p, victim)
		}
		if b, _ := os.ReadFile(victim); string(b) != "root's\n" {
			t.Errorf("the symlink's target now holds %q", b)
		}
	})
	t.Run("fifo", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "hook.log")
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if f, err := openHookLog(&hook.Config{Log: p}); err == nil {
			f.Close()
			t.Errorf("openHookLog opened the FIFO %s", p)
		}
	})
	t.Run("group-writable parent", func(t *testing.T) {
		// Ubuntu's /var/log is root:syslog 0775: the log's own
		// directory (root's, 0755) is what must be trusted; the walk to
		// it follows no symlink, so the group cannot redirect it.
		up := filepath.Join(t.TempDir(), "varlog")
		os.Mkdir(up, 0o775)
		os.Chmod(up, 0o775)
		p := filepath.Join(up, "netctl", "hook.log")
		f, err := openHookLog(&hook.Config{Log: p})
		if err != nil {
			t.Fatalf("openHookLog(%s) under a group-writable parent: %v", p, err)
		}
		f.Close()
		// The group swaps the log's directory for a symlink: refused.
		os.Rename(filepath.Join(up, "netctl"), filepath.Join(up, "moved"))
		elsewhere := t.TempDir()
		os.Symlink(elsewhere, filepath.Join(up, "netctl"))
		if f, err := openHookLog(&hook.Config{Log: p}); err == nil {
			f.Close()
			t.Errorf("openHookLog followed %s -> %s", filepath.Join(up, "netctl"), elsewhere)
		}
		if es, _ := os.ReadDir(elsewhere); len(es) != 0 {
			t.Errorf("the hook wrote %v into the symlink's target", es)
		}
	})
	t.Run("world-writable directory", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "open")
		os.Mkdir(d, 0o777)
		os.Chmod(d, 0o777)
		p := filepath.Join(d, "hook.log")
		if f, err := openHookLog(&hook.Config{Log: p}); err == nil {
			f.Close()
			t.Errorf("openHookLog opened %s in a directory everyone can write", p)
		}
	})
}
