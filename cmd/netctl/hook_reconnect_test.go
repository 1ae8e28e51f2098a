package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHookReconnectSurvivesBadConfig: a host config the hook refuses
// (broken JSON, or one others may write) fails a prepare, but a
// reconnect exits 0 with a line saying so: libvirt kills a running
// domain whose reconnect hook fails.
func TestHookReconnectSurvivesBadConfig(t *testing.T) {
	d := t.TempDir()
	cfg := filepath.Join(d, "hook.json")
	os.WriteFile(cfg, []byte(`{"manage": "some"}`), 0o644)
	t.Setenv("NETCTL_HOOK_CONFIG", cfg)
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(d, "run"))
	var stderr bytes.Buffer
	if err := runHookQemu(&stderr, "dom", "reconnect", "begin", strings.NewReader("<domain/>")); err != nil {
		t.Errorf("reconnect with a bad config: %v; libvirt would kill the domain", err)
	}
	if !strings.Contains(stderr.String(), "record not rebuilt") {
		t.Errorf("stderr %q", stderr.String())
	}
	if err := runHookQemu(&stderr, "dom", "prepare", "begin", strings.NewReader("<domain/>")); err == nil {
		t.Errorf("prepare with a bad config succeeded")
	}
}
