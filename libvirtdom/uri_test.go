package libvirtdom

import (
	"errors"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

func TestParseURI(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	only := func(p string) func(string) bool { return func(s string) bool { return s == p } }
	for _, c := range []struct {
		uri    string
		exists func(string) bool
		socket string
		open   string
	}{
		{"", only("/run/libvirt/libvirt-sock"), "/run/libvirt/libvirt-sock", "qemu:///system"},
		{"qemu:///system", only("/run/libvirt/virtqemud-sock"), "/run/libvirt/virtqemud-sock", "qemu:///system"},
		{"qemu:///system", only("none"), "/run/libvirt/virtqemud-sock", "qemu:///system"},
		{"qemu+unix:///system?socket=/tmp/x/libvirt-sock", only("none"), "/tmp/x/libvirt-sock", "qemu:///system"},
		{"qemu:///session", only("/run/user/1000/libvirt/libvirt-sock"), "/run/user/1000/libvirt/libvirt-sock", "qemu:///session"},
	} {
		got, err := parseURI(c.uri, c.exists)
		if err != nil || got.Socket != c.socket || got.Open != c.open {
			t.Errorf("parseURI(%q) = %+v, %v; want socket %s, open %s", c.uri, got, err, c.socket, c.open)
		}
	}
	for _, bad := range []string{"qemu+ssh://host/system", "qemu://host/system", "xen:///system", "qemu:///other",
		"qemu+unix:///system?socket=rel/sock", "qemu:///system?no_verify=1", "qemu+tcp:///system", "%zz"} {
		if _, err := parseURI(bad, only("")); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("parseURI(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
