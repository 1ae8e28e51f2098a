package l2

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestKVMCPUs(t *testing.T) {
	if err := kvmCPUs(1); err == nil || !strings.Contains(err.Error(), "smp=2") {
		t.Errorf("1 vCPU: %v, want an error naming smp=2", err)
	}
	if err := kvmCPUs(2); err != nil {
		t.Errorf("2 vCPUs: %v", err)
	}
}

// TestKVMPackagesHaveTwoVCPUs: every package whose VM tests start a nested
// KVM guest (they call l2.LoadKVM or l2.PreferKVM) asks netctl-vm for 2 vCPUs. With one,
// the cni package's VM froze until the harness killed it (31 minutes of a
// CI run); LoadKVM now refuses, and this says so before any VM boots.
func TestKVMPackagesHaveTwoVCPUs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_vm_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "l2.LoadKVM()") && !strings.Contains(string(b), "l2.PreferKVM(") {
			return nil
		}
		found++
		if n := confSMP(t, filepath.Join(filepath.Dir(p), "testdata", "netctl-vm.conf")); n < 2 {
			rel, _ := filepath.Rel(root, p)
			t.Errorf("%s starts a nested KVM guest but its package's VM has %d vCPU: put smp=2 in testdata/netctl-vm.conf", rel, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 5 {
		t.Fatalf("found %d VM test files calling l2.LoadKVM or l2.PreferKVM, want at least 5 (cni, migrate, test/libvirtd, stats, cmd/netctl): is the walk wrong?", found)
	}
}

// confSMP is the smp= of a netctl-vm.conf, 1 (netctl-vm's default) without one.
func confSMP(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 1
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "smp="); ok {
			if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil { // as netctl-vm reads it
				t.Fatalf("%s: smp=%q", path, v)
			}
		}
	}
	return n
}
