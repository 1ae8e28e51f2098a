package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostBackendReasons: on this host (no vdpa, no vhost-net) netctl
// attach to a real, paused QEMU 7.2 with --backend vdpa or vhost-net
// fails (exit 1) with that backend's own reason, which says what to load,
// once, and changes nothing; auto falls back to userspace and prints each
// skipped step's reason without repeating the backend's name.
func TestHostBackendReasons(t *testing.T) {
	testenv.Host(t)
	bin := netctlBinary(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	t.Setenv("NETCTL_RUN_DIR", run)
	sock, _ := qemutest.StartPaused(t, "reasons")
	links := linkNames(t)
	for backend, want := range map[string]string{
		"vdpa": "netctl: attach: choose the backend: policy: backend vdpa is not available here: this kernel has no vdpa support loaded: modprobe vdpa (CONFIG_VDPA, Linux 5.12+",
		"vhost-net": "netctl: attach: choose the backend: policy: backend vhost-net is not available here: /dev/vhost-net: no such file or directory: " +
			"this kernel has no vhost-net loaded; run 'modprobe vhost_net' (CONFIG_VHOST_NET)",
	} {
		r := execNetctl(t, bin, "attach", "--qmp", sock, "--id", "n1", "--backend", backend)
		t.Logf("netctl attach --backend %s: exit %d\n%s", backend, r.code, r.stderr)
		line, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 1 || !strings.HasPrefix(line, want) || hasStutter(line) || strings.Contains(line, "not requested") {
			t.Errorf("--backend %s: exit %d, %q, want it to start with %q", backend, r.code, line, want)
		}
	}
	if got := dirNames(t, filepath.Join(run, "nics")); len(got) != 0 || linkNames(t) != links {
		t.Errorf("a refused attach left records %v or links %s", got, linkNames(t))
	}
	r := execNetctl(t, bin, "attach", "--qmp", sock, "--id", "n1")
	t.Logf("netctl attach:\n%s", r.stdout)
	want := "  backend:    vdpa: this kernel has no vdpa support loaded: modprobe vdpa"
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "; vhost-net: /dev/vhost-net: no such file or directory: this kernel has no vhost-net loaded; run 'modprobe vhost_net'") ||
		strings.Contains(r.stdout, "vdpa: vdpa") || strings.Contains(r.stdout, "vhost-net: vhost-net") || strings.Contains(r.stdout, "not available") {
		t.Errorf("attach: %+v", r)
	}
}
