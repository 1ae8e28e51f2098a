package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHookMigrateBeginPassesGarbage: migrate begin of a domain netctl
// manages nothing in passes silently (exit 0, nothing on stdout or
// stderr) whatever comes on stdin (binary junk, a truncated XML, an XML
// of 20 MiB, nothing at all) and whatever the host config holds (not
// JSON, an unknown key).
func TestHookMigrateBeginPassesGarbage(t *testing.T) {
	d := t.TempDir()
	run := filepath.Join(d, "run")
	big := append([]byte("<domain type='kvm'><name>hookdom</name><description>"), bytes.Repeat([]byte("x"), 20<<20)...)
	big = append(big, []byte("</description><devices><interface type='ethernet'><model type='virtio'/></interface></devices></domain>")...)
	inputs := map[string][]byte{
		"binary":    {0, 1, 2, 0xff, 0xfe, '<', 0, '>'},
		"truncated": []byte("<domain type='kvm'><name>hookdom</name><devices><interface type='ethernet'><target dev='"),
		"huge":      big,
		"empty":     nil,
		"other":     []byte("<domain type='kvm'><name>otherdom</name></domain>"),
	}
	for cname, conf := range map[string]string{"not json": "{{{\x00", "unknown key": `{"log": "-", "frobnicate": 1}`, "plan missing": `{"log": "-", "plan": "/nonexistent/p.json"}`} {
		cfg := filepath.Join(d, "hook.json")
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, in := range inputs {
			if r := hookInProcess(t, cfg, run, in, "hookdom", "migrate", "begin", "-"); r != (result{0, "", ""}) {
				t.Errorf("config %s, stdin %s: %+v; want exit 0 and no output", cname, name, r)
			}
		}
	}
}
