package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// silentPassKnown are VM tests of other areas that still end early on a
// kernel without a capability, having checked nothing there (issue 10,
// "tests that cannot lie"). Each is to be rewritten with Require (or to
// assert the kernel's error before it returns) and then taken off this
// list; the list may only shrink.
var silentPassKnown = map[string]bool{}

// TestNoSilentPassInVMTests scans every *_vm_test.go of the module for a
// VM test that, depending on the kernel (k.Has(...), k.Name), returns or
// skips at once: on that kernel it would PASS (or SKIP) having checked
// nothing. Use Require instead, or assert what the kernel does there
// before returning.
func TestNoSilentPassInVMTests(t *testing.T) {
	root := srcscan.Root(t)
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_vm_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, fn := range silentPasses(t, path) {
			found[filepath.ToSlash(rel)+":"+fn] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range found {
		if !silentPassKnown[k] {
			t.Errorf("%s returns or skips at once on a kernel without a capability, checking nothing there: use testenv.Require, or assert the kernel's error before returning", k)
		}
	}
	for k := range silentPassKnown {
		if !found[k] {
			t.Logf("%s no longer ends early unchecked: take it off silentPassKnown", k)
		}
	}
}

// silentPasses returns the TestVM functions of file that hold an if on
// the kernel whose whole body is a return or a t.Skip.
func silentPasses(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "TestVM") {
			continue
		}
		bad := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			is, ok := n.(*ast.IfStmt)
			if !ok || !kernelDependent(is.Cond) || len(is.Body.List) != 1 {
				return true
			}
			switch s := is.Body.List[0].(type) {
			case *ast.ReturnStmt:
				bad = true
			case *ast.ExprStmt:
				if c, ok := s.X.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
						bad = true
					}
				}
			}
			return true
		})
		if bad {
			out = append(out, fd.Name.Name)
		}
	}
	return out
}

// kernelDependent reports whether cond asks about the VM's kernel: a call
// of a method Has, or a selector Name (k.Name == "6.1").
func kernelDependent(cond ast.Expr) bool {
	dep := false
	ast.Inspect(cond, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Has" {
				dep = true
			}
		case *ast.SelectorExpr:
			if x.Sel.Name == "Name" {
				dep = true
			}
		}
		return !dep
	})
	return dep
}

// The scan itself: it finds each shape of early exit and passes the ones
// that check something first.
func TestSilentPassScan(t *testing.T) {
	src := `package p
func TestVMReturns(t *testing.T) { k := testenv.VM(t); if !k.Has("vdpa") { return }; t.Log(k) }
func TestVMSkips(t *testing.T) { k := testenv.VM(t); if k.Name == "6.1" { t.Skip("no") } }
func TestVMChecksFirst(t *testing.T) { k := testenv.VM(t); _, err := Dial(); if !k.Has("vdpa") { if err == nil { t.Fatal(err) }; return } }
func TestVMRequire(t *testing.T) { testenv.Require(t, "vdpa", func(m *testenv.Missing) { m.Err(err, nil) }) }
func TestVMOtherIf(t *testing.T) { if err != nil { return } }
func helperReturns(k *testenv.Kernel) { if !k.Has("x") { return } }
`
	file := filepath.Join(t.TempDir(), "x_vm_test.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(silentPasses(t, file), ",")
	if want := "TestVMReturns,TestVMSkips"; got != want {
		t.Errorf("found %s, want %s", got, want)
	}
}
