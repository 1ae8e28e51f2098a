package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewHookRefusesPlantableRunDir: the hook runs as root and
// deletes the taps and vdpa devices its records name, so records in a
// directory another user can write (a --run-dir under a 0777 directory,
// one another user owns) are records anyone can plant: a planted record
// for a domain's key makes its release delete any tap or vdpa device on
// the host. install must refuse such a --run-dir, and the hook must not
// use one (it passes by: a domain netctl manages nothing in still
// starts). Before the fix both took it.
func TestReviewHookRefusesPlantableRunDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test chowns files to nobody: run it as root (make test does)")
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(theirs, 65534, 65534)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{filepath.Join(open, "run"), filepath.Join(theirs, "run"), open} {
		if _, _, err := installHook(t.TempDir(), bin, hookSettings{runDir: run}); err == nil || !strings.Contains(err.Error(), "the hook runs as root") {
			t.Errorf("install with --run-dir %s: %v, want a refusal that says why", run, err)
		}
		var stderr bytes.Buffer
		err := runHookQemu(&stderr, hookSettings{config: filepath.Join(t.TempDir(), "none.json"), runDir: run}, "vf", "release", "end", nil)
		if err != nil {
			t.Errorf("release of a domain netctl manages nothing in, run dir %s: %v", run, err)
		}
		if _, err := os.Stat(filepath.Join(run, "hook")); err == nil {
			t.Errorf("the hook used run dir %s", run)
		}
		if _, err := os.Stat(filepath.Join(run, "locks")); err == nil {
			t.Errorf("the hook made %s/locks", run)
		}
	}
}
