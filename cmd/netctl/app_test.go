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
