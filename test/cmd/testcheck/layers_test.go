package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryTestRunsInALayer: make test runs TestVM* only in packages with
// a *_vm_test.go file (the Makefile's VM_PKGS), TestHarness* only in
// test/vm, and skips both in the unit layer. A test named so elsewhere
// runs nowhere: three unit tests (state's TestVMKey, ...) did not run for
// months that way.
func TestEveryTestRunsInALayer(t *testing.T) {
	_, root, err := findModule()
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile(`(?m)^func (Test(?:VM|Harness)[A-Za-z0-9_]*)\(`)
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		rel, _ := filepath.Rel(root, p)
		for _, m := range fn.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			if strings.HasPrefix(name, "TestHarness") {
				if filepath.ToSlash(filepath.Dir(rel)) != "test/vm" {
					t.Errorf("%s: %s runs in no layer (make test-harness runs test/vm's only): rename it", rel, name)
				}
				continue
			}
			vm, _ := filepath.Glob(filepath.Join(dir, "*_vm_test.go"))
			if len(vm) == 0 {
				t.Errorf("%s: %s runs in no layer (the VM layer runs packages with a *_vm_test.go file, the unit layer skips ^TestVM): rename it or move it to a _vm_test.go file", rel, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked %d test files under %s: is the walk wrong?", files, root)
	}
}
