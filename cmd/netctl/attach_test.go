package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/test/qemutest"
)

// TestAttachUsageErrors: bad input to attach, detach and list is refused
// before anything is touched: exit 2 and one line with a hint for usage
// errors, exit 1 for --vm (not wired yet) and a socket that is not QEMU.
func TestAttachUsageErrors(t *testing.T) {
	bin := netctlBinary(t)
	dir := t.TempDir()
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(dir, "run"))
	sock := qemutest.NotQMP(t, "220 smtp ready\r\n", 0)
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"attach", "--id", "n1"}, 2, "name the VM: --vm NAME or --qmp SOCKET"},
		{[]string{"attach", "--qmp", sock}, 2, "--id is required"},
		{[]string{"attach", "--vm", "a", "--qmp", sock, "--id", "n1"}, 2, "not both"},
		{[]string{"attach", "--qmp", sock, "--id", "n1", "--mac", "52:54:00"}, 2, "want six hex bytes"},
		{[]string{"attach", "--qmp", sock, "--id", "n1", "--queues", "0"}, 2, "out of range 1..256"},
		{[]string{"attach", "--qmp", sock, "--id", "n1", "--queues", "257"}, 2, "out of range 1..256"},
		{[]string{"attach", "--qmp", sock, "--id", "n1", "--backend", "dpdk"}, 2, "use auto, vdpa, vhost-net or userspace"},
		{[]string{"attach", "--qmp", sock, "--id", "9x"}, 2, "QEMU's id rule"},
		{[]string{"attach", "--qmp", sock, "--id", "n1", "--tap", "t0", "--macvtap", "eth0"}, 2, "at most one of"},
		{[]string{"attach", "--qmp", filepath.Join(dir, "none.sock"), "--id", "n1"}, 2, "name QEMU's QMP socket"},
		{[]string{"attach", "--qmp", "/etc/hostname", "--id", "n1"}, 2, "is not a socket"},
		{[]string{"attach", "--vm", "nctl-no-such-vm", "--id", "n1"}, 1, `no VM named "nctl-no-such-vm"`},
		{[]string{"attach", "--qmp", sock, "--id", "n1"}, 1, "connect to QEMU"},
		// On a libvirt domain: --vdpa and --mgmtdev go to libvirt (here
		// unreachable), a tap of one's own does not.
		{[]string{"attach", "--vm", "d", "--libvirt", "qemu+unix:///system?socket=" + filepath.Join(dir, "none.sock"), "--id", "n1", "--mgmtdev", "vduse"}, 1, "libvirt not reachable"},
		{[]string{"attach", "--vm", "d", "--libvirt", "qemu+unix:///system?socket=" + filepath.Join(dir, "none.sock"), "--id", "n1", "--vdpa", "vdpa0", "--backend", "vhost-net"}, 2, "need --backend vdpa or auto"},
		{[]string{"attach", "--vm", "d", "--libvirt", "qemu:///system", "--id", "n1", "--tap", "t0"}, 2, "--tap is for a hand-run QEMU"},
		{[]string{"detach", "--qmp", sock}, 2, "--id is required"},
		{[]string{"detach", "--qmp", sock, "--id", "n1", "--timeout", "0s"}, 2, "positive duration"},
		{[]string{"list", "extra"}, 2, "takes no arguments"},
	} {
		r := execNetctl(t, bin, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("netctl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.stderr)
		}
		if tc.code == 2 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("netctl %s: a usage error of more than two lines: %q", strings.Join(tc.args, " "), r.stderr)
		}
	}
	r := execNetctl(t, bin, "list", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list --json with no records: %+v", r)
	}
}
