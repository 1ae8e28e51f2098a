package errs

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// TestSentinelsDefinedOnce scans the module for package-level variables
// that carry one of this package's sentinel names (ErrNotSupported,
// ErrInvalid, ...). Each must be this package's value (a re-export such
// as vdpa.ErrNotSupported = errs.ErrNotSupported), never a second
// errors.New or fmt.Errorf: two values of one name make errors.Is
// against one package's sentinel miss the other's errors (issue 10 §6:
// ErrNotSupported was defined twice). It also fails when the public
// packages that issue 10 names stop re-exporting them.
func TestSentinelsDefinedOnce(t *testing.T) {
	names := map[string]bool{}
	for _, n := range []string{"ErrNotSupported", "ErrNotAvailable", "ErrBusy", "ErrClosed", "ErrInvalid", "ErrConflict"} {
		names[n] = true
	}
	reexports := map[string]int{} // package directory -> sentinels re-exported
	srcscan.Walk(t, srcscan.Options{MinFiles: 50}, func(path string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !names[id.Name] || filepath.Base(filepath.Dir(path)) == "errs" {
						continue
					}
					if i < len(vs.Values) && srcscan.IsSel(vs.Values[i], "errs", id.Name) {
						reexports[filepath.Base(filepath.Dir(path))]++
						continue
					}
					t.Errorf("%s: %s is defined here as its own value; re-export internal/errs' instead (%s = errs.%s)",
						fset.Position(id.Pos()), id.Name, id.Name, id.Name)
				}
			}
		}
	})
	for _, pkg := range []string{"macvtap", "vhostnet", "vdpa"} {
		if reexports[pkg] < 4 {
			t.Errorf("package %s re-exports %d of internal/errs' sentinels, want at least ErrNotSupported, ErrNotAvailable, ErrClosed and ErrInvalid",
				pkg, reexports[pkg])
		}
	}
}
