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
// VM test or helper that, depending on the kernel (k.Has(...), k.Name, a
// variable set from one), returns or skips having checked nothing on the
// way (only logs, say): on that kernel it would PASS (or SKIP) having
// checked nothing. Use Require instead, or assert what the kernel does there
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

// silentPasses returns the functions of file (TestVM functions and their
// helpers alike) that hold an if on the kernel (k.Has(...), k.Name, or a
// variable set from one) whose body ends in a return or a t.Skip and
// checks nothing before it (no t.Error, t.Fatal, Missing.Err or .Check, no
// call of a check or assert helper).
func silentPasses(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		kernelVars := map[string]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				for i, rhs := range as.Rhs {
					if i < len(as.Lhs) && kernelDependent(rhs, nil) {
						if id, ok := as.Lhs[i].(*ast.Ident); ok {
							kernelVars[id.Name] = true
						}
					}
				}
			}
			return true
		})
		bad := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			is, ok := n.(*ast.IfStmt)
			if !ok || !kernelDependent(is.Cond, kernelVars) || len(is.Body.List) == 0 {
				return true
			}
			if endsEarly(is.Body.List[len(is.Body.List)-1]) && !checks(is.Body) {
				bad = true
			}
			return true
		})
		if bad {
			out = append(out, fd.Name.Name)
		}
	}
	return out
}

// endsEarly: a return, or a t.Skip/Skipf/SkipNow.
func endsEarly(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		if c, ok := s.X.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
				return true
			}
		}
	}
	return false
}

// checks reports whether n calls something that can fail the test: t.Error,
// t.Errorf, t.Fatal, t.Fatalf, t.Fail, Missing's Err and Check, or a
// helper whose name starts with check, assert, expect or want.
func checks(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		var name string
		switch f := c.Fun.(type) {
		case *ast.SelectorExpr:
			name = f.Sel.Name
		case *ast.Ident:
			name = f.Name
		}
		switch {
		case strings.HasPrefix(name, "Error"), strings.HasPrefix(name, "Fatal"), strings.HasPrefix(name, "Fail"),
			name == "Err", name == "Check":
			found = true
		default:
			for _, p := range []string{"check", "assert", "expect", "want", "Check", "Assert", "Expect", "Want"} {
				if strings.HasPrefix(name, p) {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// kernelDependent reports whether cond asks about the VM's kernel: a call
// of a method Has, a selector Name (k.Name == "6.1"), or a variable that
// was set from one (vars).
func kernelDependent(cond ast.Expr, vars map[string]bool) bool {
	dep := false
	ast.Inspect(cond, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Has" {
				dep = true
			} else if ok && sel.Sel.Name == "Name" && len(x.Args) == 0 {
				// A method Name() (a directory entry's, a file's) is not
				// the kernel's Name field: look only at its receiver.
				if kernelDependent(sel.X, vars) {
					dep = true
				}
				return false
			}
		case *ast.SelectorExpr:
			if x.Sel.Name == "Name" {
				dep = true
			}
		case *ast.Ident:
			if vars[x.Name] {
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
func TestVMLogsThenReturns(t *testing.T) { k := testenv.VM(t); if !k.Has("vdpa") { t.Logf("no vdpa on %s", k.Name); return }; t.Log(k) }
func TestVMThroughAVariable(t *testing.T) { k := testenv.VM(t); vdpa := k.Has("vdpa"); if !vdpa { return } }
func TestVMAssertsThenReturns(t *testing.T) { k := testenv.VM(t); if !k.Has("vdpa") { if err == nil { t.Errorf("x") }; t.Log("y"); return } }
func TestVMHelperChecks(t *testing.T) { k := testenv.VM(t); if !k.Has("vdpa") { assertNoVDPA(t, err); return } }
func testWithout(t *testing.T, k *testenv.Kernel) { if !k.Has("vduse") { t.Log("skip"); return } }
func findPID(ents []os.DirEntry) int { for _, e := range ents { n, err := strconv.Atoi(e.Name()); if err == nil && n > 1 { return n } }; return 0 }
`
	file := filepath.Join(t.TempDir(), "x_vm_test.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(silentPasses(t, file), ",")
	if want := "TestVMReturns,TestVMSkips,helperReturns,TestVMLogsThenReturns,TestVMThroughAVariable,testWithout"; got != want {
		t.Errorf("found %s, want %s", got, want)
	}
}
