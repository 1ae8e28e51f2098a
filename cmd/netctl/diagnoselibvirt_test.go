package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/libvirtdom"
)

// TestLibvirtFlagsRefused: --qemu-monitor means a libvirt domain and
// is refused for a socket or a saved snapshot; --libvirt needs --vm;
// --vm goes with neither --qmp nor --from. Nothing is dialled.
func TestLibvirtFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose", "--qmp", "/nonexistent.sock", "--qemu-monitor"}, "--qemu-monitor is for a libvirt domain"},
		{[]string{"diagnose", "--from", "x.json", "--qemu-monitor"}, "--qemu-monitor is for a libvirt domain"},
		{[]string{"diagnose", "--libvirt", "qemu:///system"}, "--libvirt needs --vm DOMAIN"},
		{[]string{"diagnose", "--vm", "d", "--libvirt", "qemu:///system", "--qmp", "/x.sock"}, "--libvirt needs --vm DOMAIN"},
		{[]string{"diagnose", "--vm", "d", "--libvirt", "qemu:///system", "--tap", "t0"}, "--tap goes with --from"},
		{[]string{"diagnose", "--vm", "d", "--from", "x.json"}, "give one of --vm, --qmp and --from"},
		{[]string{"stats", "--qmp", "/nonexistent.sock", "--qemu-monitor"}, "--qemu-monitor is for a libvirt domain"},
		{[]string{"stats", "--libvirt", "qemu:///system"}, "--libvirt needs --vm DOMAIN"},
	} {
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(append([]string{"netctl"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("netctl %v: %v (want %q)", tc.args, err, tc.want)
		}
	}
}

// TestDiagnoseLibvirtUnreachable: --vm DOMAIN --libvirt URI whose daemon
// does not answer says so (libvirt not reachable), before anything else.
func TestDiagnoseLibvirtUnreachable(t *testing.T) {
	sock := t.TempDir() + "/none.sock"
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run([]string{"netctl", "diagnose", "--vm", "d", "--libvirt", "qemu+unix:///system?socket=" + sock})
	if !errors.Is(err, libvirtdom.ErrUnreachable) || !strings.Contains(err.Error(), sock) {
		t.Errorf("diagnose on a libvirt that does not answer: %v", err)
	}
}
