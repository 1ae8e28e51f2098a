package probe

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallersTestSentinelsNotErrnos: policy and the command line call
// netctl's public packages, which map the kernel's errnos to the shared
// sentinels (ErrNotSupported, ErrNotAvailable, ...). A caller that tests
// errors.Is(err, unix.ENOTTY) instead depends on how a package talks to
// the kernel; this scan of policy/ and cmd/ fails on any such test.
func TestCallersTestSentinelsNotErrnos(t *testing.T) {
	files := 0
	for _, dir := range []string{"../../policy", "../../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 || !isSel(call.Fun, "errors", "Is") {
					return true
				}
				if sel, ok := call.Args[1].(*ast.SelectorExpr); ok && isSel(sel, "unix", sel.Sel.Name) && strings.HasPrefix(sel.Sel.Name, "E") {
					t.Errorf("%s: errors.Is(..., unix.%s): test the package's sentinel (ErrNotSupported, ...) instead", fset.Position(call.Pos()), sel.Sel.Name)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 10 {
		t.Fatalf("scanned only %d files", files)
	}
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
