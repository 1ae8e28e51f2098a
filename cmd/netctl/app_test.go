package main

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) string {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	if err := app.Run(append([]string{"netctl"}, args...)); err != nil {
		t.Fatalf("netctl %v: %v", args, err)
	}
	return out.String()
}

func TestHelpListsCommands(t *testing.T) {
	out := run(t, "--help")
	for _, want := range []string{"netctl", "version", "vhost-net"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	out := run(t, "version")
	if !strings.HasPrefix(out, "netctl dev") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version printed %q", out)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(run(t, "version", "-j")), &v); err != nil || v.Version != "dev" || v.Go != runtime.Version() {
		t.Errorf("version -j: %+v, %v", v, err)
	}
}

// TestSelftestWithoutVhostNet: on a host without /dev/vhost-net (the
// development machines), netctl selftest fails with what to do.
func TestSelftestWithoutVhostNet(t *testing.T) {
	if _, err := os.Stat("/dev/vhost-net"); err == nil {
		t.Skip("this host has /dev/vhost-net")
	}
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run([]string{"netctl", "selftest", "--queues", "2"})
	if err == nil || !strings.HasPrefix(err.Error(), "selftest: ") || strings.Contains(err.Error(), "selftest: selftest") || !strings.Contains(err.Error(), "modprobe vhost_net") {
		t.Errorf("got %v, want a selftest failure that says to load vhost_net", err)
	}
}

// TestPlanDropsUSO: netctl plan on the probe output of the 6.12 and 6.1
// VMs (saved in policy/testdata) drops USO and says why.
func TestPlanDropsUSO(t *testing.T) {
	out := run(t, "plan", "../../policy/testdata/probe-6.12.json", "../../policy/testdata/probe-6.1.json")
	for _, want := range []string{"safe on all 2 hosts:", "GUEST_TSO4", "dropped GUEST_USO4: missing on probe-6.1 (tun on 6.1.0-57-amd64 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2)",
		"guest_uso4=off"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(strings.SplitN(out, "\n", 2)[0], "USO") {
		t.Errorf("USO offered as safe:\n%s", out)
	}
}
