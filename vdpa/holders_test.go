package vdpa

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHoldersByDeviceNumber: a fake /proc whose fds link to /dev/null
// (1:3) under two names; holders are matched by st_rdev, not by path.
func TestHoldersByDeviceNumber(t *testing.T) {
	var null unix.Stat_t
	if err := unix.Stat("/dev/null", &null); err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	other := filepath.Join(t.TempDir(), "dev-null-elsewhere") // stands in for a mknod'ed copy
	if err := os.Symlink("/dev/null", other); err != nil {
		t.Fatal(err)
	}
	mk := func(pid, comm string, fds map[string]string) {
		os.MkdirAll(filepath.Join(proc, pid, "fd"), 0o755)
		os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm+"\n"), 0o644)
		for fd, target := range fds {
			if err := os.Symlink(target, filepath.Join(proc, pid, "fd", fd)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("10", "qemu", map[string]string{"0": "/dev/zero", "7": "/dev/null"})
	mk("11", "other", map[string]string{"3": other})
	mk("12", "nobody", map[string]string{"0": "/dev/zero"})
	mk("13", "gone", map[string]string{"4": "/nonexistent"}) // fd closed during the scan
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)
	os.MkdirAll(filepath.Join(proc, "14"), 0o755) // process exited: no fd dir
	mk("15", "secret", nil)
	denied := filepath.Join(proc, "15", "fd")
	readDir := func(dir string) ([]os.DirEntry, error) {
		if dir == denied {
			return nil, &os.PathError{Op: "open", Path: dir, Err: unix.EACCES}
		}
		return os.ReadDir(dir)
	}
	hs, err := holdersOf(proc, null.Rdev, readDir)
	if len(hs) != 2 || hs[0].PID != 10 || hs[0].Comm != "qemu" || hs[0].Path != "/dev/null" ||
		hs[1].PID != 11 || hs[1].Path != other {
		t.Errorf("holders %+v", hs)
	}
	var ue *UnreadableError
	if !errors.As(err, &ue) || len(ue.PIDs) != 1 || ue.PIDs[0] != 15 || !errors.Is(err, os.ErrPermission) ||
		!strings.Contains(err.Error(), "pid 15") {
		t.Errorf("unreadable: %v, want pid 15 reported with EACCES", err)
	}
}

func TestParseDevNumber(t *testing.T) {
	for in, want := range map[string]uint64{"240:0\n": unix.Mkdev(240, 0), "1:3": unix.Mkdev(1, 3), "4095:1048575\n": unix.Mkdev(4095, 1048575)} {
		if got, err := parseDevNumber([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %#x, %v; want %#x", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "240", "240:", ":0", "-1:0", "4096:0", "0:1048576", "1:2:3", "a:b", "240:0\n\n", " 240:0"} {
		if _, err := parseDevNumber([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", in, err)
		}
	}
}
