package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/test/qemutest"
)

// unitSetting reads the values of key in a systemd unit file.
func unitSetting(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return ""
}

// withCaps writes a wrapper that runs bin as root with only caps (as
// systemd does for CapabilityBoundingSet and AmbientCapabilities, with
// NoNewPrivileges), and returns its path.
func withCaps(t *testing.T, bin string, caps []string) string {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv missing (util-linux)")
	}
	set := "-all"
	for _, c := range caps {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	w := filepath.Join(t.TempDir(), "netctl-caps")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --no-new-privs --bounding-set=%s --inh-caps=%s --ambient-caps=%s %s \"$@\"\n",
		setpriv, set, set, set, bin)
	if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestHostExporterUnitCaps runs netctl exporter with exactly the
// capabilities deploy/systemd/netctl-exporter.service gives it, against a
// QEMU (root's, like the machine's own) whose QMP socket is another
// user's (0600): the VM is listed and its NIC served. Without
// CAP_SYS_PTRACE (QEMU's /proc/PID/root, ns) or without CAP_DAC_OVERRIDE
// (the socket) the same VM cannot be listed: each is needed.
func TestHostExporterUnitCaps(t *testing.T) {
	testenv.Host(t)
	unit := filepath.Join(repoRoot, "deploy/systemd/netctl-exporter.service")
	bounding := strings.Fields(unitSetting(t, unit, "CapabilityBoundingSet"))
	if ambient := strings.Fields(unitSetting(t, unit, "AmbientCapabilities")); strings.Join(ambient, " ") != strings.Join(bounding, " ") {
		t.Errorf("%s: AmbientCapabilities %v, CapabilityBoundingSet %v: they should be the same", unit, ambient, bounding)
	}
	if unitSetting(t, unit, "NoNewPrivileges") != "yes" {
		t.Errorf("%s: NoNewPrivileges is not yes", unit)
	}
	bin := netctlBinary(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	sock, _ := qemutest.StartPaused(t, "expcaps", "-netdev", "tap,id=t0,ifname=expcapstap,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=t0,id=nic0")
	if err := os.Chown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	without := func(c string) []string {
		var out []string
		for _, b := range bounding {
			if b != c {
				out = append(out, b)
			}
		}
		return out
	}
	nic := map[string]string{"vm": "expcaps", "nic": "nic0"}
	target := map[string]string{"target": "vm:expcaps"}
	for i, tc := range []struct {
		name string
		caps []string
		up   float64
	}{
		{"the unit's", bounding, 1},
		{"without CAP_SYS_PTRACE", without("CAP_SYS_PTRACE"), 0},
		{"without CAP_DAC_OVERRIDE", without("CAP_DAC_OVERRIDE"), 0},
	} {
		addr := fmt.Sprintf("127.0.0.1:%d", 9480+i)
		ex := prom.StartExporter(t, prom.NewHTTP(t), withCaps(t, bin, tc.caps), addr, os.Environ(), "--vm", "expcaps")
		body, mfs := ex.Scrape(t)
		v, ok := prom.Value(mfs, "netctl_target_up", target)
		why := prom.LabelValue(mfs, "netctl_target_error_info", target, "reason")
		if !ok || v != tc.up {
			t.Errorf("%s capabilities %v: netctl_target_up%v = %v (%v), want %v (reason %q)\n%s", tc.name, tc.caps, target, v, ok, tc.up, why, body)
		}
		if tc.up == 1 {
			if v, ok := prom.Value(mfs, "netctl_nic_up", nic); !ok || v != 1 {
				t.Errorf("%s capabilities: netctl_nic_up%v = %v (%v), want 1\n%s", tc.name, nic, v, ok, body)
			}
		} else {
			t.Logf("%s: the VM is not listed: %q; %s", tc.name, why, strings.TrimSpace(ex.Stderr.String()))
		}
		ex.Stop(t, os.Interrupt)
	}
}
