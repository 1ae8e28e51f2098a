package main

import (
	"bytes"
	"encoding/json"
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
