package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// TestHookStatusLibvirtNotReachable: with no libvirt to ask, hook status
// says so beside each decision ("runs: libvirt not reachable"), and never
// prints the decision as what runs; --json carries it as live.state.
func TestHookStatusLibvirtNotReachable(t *testing.T) {
	run := t.TempDir()
	st, err := state.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.Domain{Schema: state.DomainSchema, Name: "web1", UUID: "c7a5fdbd-edaf-9455-926a-d65c16db1809", Status: state.DomainStarted,
		Interfaces: []state.HookInterface{{MAC: "52:54:00:aa:00:01", Kind: "tap", Name: "vm1tap0", Backend: "userspace", Profile: "throughput"}}}
	if err := st.SaveDomain(rec); err != nil {
		t.Fatal(err)
	}
	uri := "qemu+unix:///system?socket=" + filepath.Join(t.TempDir(), "no-sock")
	var stdout, stderr bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"netctl", "hook", "status", "--run-dir", run, "--libvirt", uri}); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"decided backend userspace", "libvirt: libvirt not reachable", "is libvirtd running? socket", "runs: libvirt not reachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("hook status lacks %q:\n%s", want, out)
		}
	}
	stdout.Reset()
	if err := app.Run([]string{"netctl", "hook", "status", "--run-dir", run, "--libvirt", uri, "--json"}); err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Name string `json:"domain"`
		Live struct {
			State string `json:"state"`
		} `json:"live"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &recs); err != nil || len(recs) != 1 || recs[0].Name != "web1" || !strings.HasPrefix(recs[0].Live.State, "libvirt not reachable") {
		t.Errorf("hook status --json: %v\n%s", err, stdout.String())
	}
	// --libvirt '': not asked, said so.
	stdout.Reset()
	if err := app.Run([]string{"netctl", "hook", "status", "--run-dir", run, "--libvirt", ""}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "runs: not asked") {
		t.Errorf("hook status --libvirt '':\n%s", stdout.String())
	}
}

// TestHookPinNeedsDomain: hook pin without a domain is a usage error, and
// with libvirt not reachable says which socket.
func TestHookPinNeedsDomain(t *testing.T) {
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	if err := app.Run([]string{"netctl", "hook", "pin"}); err == nil {
		t.Error("hook pin without a domain: no error")
	}
	sock := filepath.Join(t.TempDir(), "no-sock")
	err := app.Run([]string{"netctl", "hook", "pin", "--config", filepath.Join(t.TempDir(), "none.json"), "--libvirt", "qemu+unix:///system?socket=" + sock, "web1"})
	if err == nil || !strings.Contains(err.Error(), "is libvirtd running? socket "+sock) {
		t.Errorf("hook pin with no daemon: %v", err)
	}
}
