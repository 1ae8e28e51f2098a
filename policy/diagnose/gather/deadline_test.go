package gather

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/diagnose"
)

// TestReadVDPAHonoursTheDeadline: the vdpa family can stall every request
// while a vdpa dev del waits for a vhost-vdpa fd to close, so the vdpa
// part of Gather must give up when the caller's context (diagnose
// --timeout) ends instead of asking the kernel without a deadline. With a
// context that has already ended, readVDPA must not reach the kernel and
// must say why. This process holds no vhost-vdpa fd, so readVDPA takes the
// path that dials the family to explain why.
func TestReadVDPAHonoursTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &diagnose.Snapshot{}
	readVDPA(ctx, s, os.Getpid())
	if len(s.Errors) == 0 || !strings.Contains(strings.Join(s.Errors, "\n"), context.Canceled.Error()) {
		t.Errorf("readVDPA with an ended context noted %q, want the context's error", s.Errors)
	}
}

// TestNoContextTODO: a call that can block (netlink, QMP) takes the
// caller's context; context.TODO() in product code is such a call left
// without a deadline. The scan covers every non-test Go file of the module.
func TestNoContextTODO(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "context.TODO()") {
				t.Errorf("%s:%d: context.TODO(): pass the caller's context", path, i+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned only %d files", files)
	}
}
