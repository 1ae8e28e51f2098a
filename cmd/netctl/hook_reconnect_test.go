package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/hook"
)

// TestHookReconnectSurvivesBadConfig: a host config the hook refuses
// (broken JSON, or one others may write) fails the prepare of a domain
// that names netctl, but a reconnect exits 0 with a line saying so:
// libvirt kills a running domain whose reconnect hook fails.
func TestHookReconnectSurvivesBadConfig(t *testing.T) {
	d := t.TempDir()
	cfg := filepath.Join(d, "hook.json")
	os.WriteFile(cfg, []byte(`{"manage": "some"}`), 0o644)
	set := hookSettings{config: cfg, runDir: filepath.Join(d, "run")}
	mine := `<domain><name>dom</name><metadata><netctl:hook xmlns:netctl="` + hook.Namespace + `"><netctl:interface mac="52:54:00:00:00:01"/></netctl:hook></metadata>` +
		`<devices><interface type='ethernet'><mac address='52:54:00:00:00:01'/><target dev='t0' managed='no'/></interface></devices></domain>`
	var stderr bytes.Buffer
	if err := runHookQemu(&stderr, set, "dom", "reconnect", "begin", strings.NewReader(mine)); err != nil {
		t.Errorf("reconnect with a bad config: %v; libvirt would kill the domain", err)
	}
	if !strings.Contains(stderr.String(), "record not rebuilt") {
		t.Errorf("stderr %q", stderr.String())
	}
	if err := runHookQemu(&stderr, set, "dom", "prepare", "begin", strings.NewReader(mine)); err == nil || !strings.Contains(err.Error(), `manage "some"`) {
		t.Errorf("prepare with a bad config: %v", err)
	}
}

// TestHookBadConfigPassesOthers: with a host config that does not load
// (a typo in manage, a group-writable file, a tap_owner user that is
// gone), a domain that does not name netctl passes every operation,
// printing nothing on stdout.
func TestHookBadConfigPassesOthers(t *testing.T) {
	d := t.TempDir()
	for name, body := range map[string]string{
		"typo":     `{"manage": "some"}`,
		"writable": `{}`,
		"no user":  `{"tap_owner": "nosuchuser-netctl"}`,
	} {
		cfg := filepath.Join(d, strings.ReplaceAll(name, " ", "")+".json")
		os.WriteFile(cfg, []byte(body), 0o644)
		if name == "writable" {
			os.Chmod(cfg, 0o664)
		}
		set := hookSettings{config: cfg, runDir: filepath.Join(d, "run")}
		vf := `<domain><name>vf</name><devices><interface type='hostdev' managed='yes'><driver name='vfio'/>` +
			`<source><address type='pci' domain='0x0000' bus='0x06' slot='0x02' function='0x0'/></source></interface></devices></domain>`
		for _, op := range [][2]string{{"prepare", "begin"}, {"start", "begin"}, {"started", "begin"}, {"stopped", "end"},
			{"release", "end"}, {"migrate", "begin"}, {"restore", "begin"}, {"reconnect", "begin"}, {"attach", "begin"}} {
			var stderr bytes.Buffer
			if err := runHookQemu(&stderr, set, "vf", op[0], op[1], strings.NewReader(vf)); err != nil {
				t.Errorf("%s: %s %s of a domain netctl does not manage: %v", name, op[0], op[1], err)
			}
		}
	}
}
