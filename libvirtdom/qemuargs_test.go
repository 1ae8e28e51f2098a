package libvirtdom

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestNetdevVhost reads libvirt's -netdev forms: JSON (libvirt 9 with
// QEMU 7.2) and QemuOpts, vhost on, off, implied by vhostfds, and other
// netdev types passed by.
func TestNetdevVhost(t *testing.T) {
	argv := []string{"/usr/bin/qemu-system-x86_64", "-name", "guest=d,debug-threads=on",
		"-netdev", `{"type":"tap","fds":"30:32","id":"hostnet0"}`,
		"-device", `{"driver":"virtio-net-pci","netdev":"hostnet0","id":"net0"}`,
		"-netdev", `{"type":"tap","fds":"33:34","vhost":true,"vhostfds":"35:36","id":"hostnet1"}`,
		"-netdev", "tap,fd=40,id=hostnet2,vhost=on,vhostfd=41",
		"-netdev", "tap,fd=42,id=hostnet3",
		"-netdev", "tap,fds=43:44,vhostfds=45:46,id=hostnet4",
		"-netdev", `{"type":"vhost-vdpa","vhostdev":"/dev/fdset/0","id":"hostnet5"}`,
		"-netdev", `{"type":"tap"`, "-netdev"}
	want := map[string]bool{"net0": false, "net1": true, "net2": true, "net3": false, "net4": true}
	if got := NetdevVhost(argv); !reflect.DeepEqual(got, want) {
		t.Errorf("NetdevVhost = %v, want %v", got, want)
	}
}

func TestQEMUArgsRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := QEMUArgs(dir, "none"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no pid file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.pid"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "self.pid"), []byte("1"), 0o644) // not QEMU
	for _, n := range []string{"bad", "self", "../x", ".hidden", ""} {
		if _, err := QEMUArgs(dir, n); !errors.Is(err, errs.ErrInvalid) && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
			t.Errorf("QEMUArgs(%q): %v", n, err)
		}
	}
	if _, err := QEMUArgs(dir, "self"); err == nil {
		t.Error("pid 1 taken for the domain's QEMU")
	}
}
