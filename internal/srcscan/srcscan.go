// Package srcscan walks the module's own Go files for the tests that hold
// the whole tree to a rule (no pointer laundered through a uintptr, packet
// sockets opened with protocol 0, no context.TODO in product code, callers
// testing sentinels rather than errnos). It imports only the standard
// library, so any package's tests can use it (internal/testenv cannot be
// imported by internal/linux's own tests: it imports internal/linux).
package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Root is the module's root: the first directory at or above the current
// one that holds go.mod. It fails t when there is none.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("srcscan: no go.mod above the current directory")
		}
		dir = parent
	}
}

// Options say which files Walk visits.
type Options struct {
	Dirs      []string // directories under the root to walk; all of it when empty
	SkipTests bool     // leave out *_test.go files (product code only)
	MinFiles  int      // fail when fewer files were visited (a scan that read nothing must not pass)
}

// Walk parses every Go file under the module root (hidden directories,
// testdata and bin left out) and calls visit with each, positions
// resolvable through fset. A file that does not parse fails t.
func Walk(t testing.TB, o Options, visit func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root := Root(t)
	dirs := o.Dirs
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	files := 0
	fset := token.NewFileSet()
	for _, d := range dirs {
		top := filepath.Join(root, d)
		err := filepath.WalkDir(top, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if path != top && (strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" || e.Name() == "bin") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || o.SkipTests && strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			visit(path, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < o.MinFiles {
		t.Fatalf("srcscan: read only %d Go files under %s %v, want at least %d", files, root, dirs, o.MinFiles)
	}
}

// IsSel is true when e is pkg.name (a selector on a package identifier).
func IsSel(e ast.Expr, pkg, name string) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
