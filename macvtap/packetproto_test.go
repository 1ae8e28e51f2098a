package macvtap

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

// TestPacketSocketsOpenWithProtocolZero scans every Go file of the module
// for an AF_PACKET socket opened with a protocol other than 0. Opened with
// ETH_P_ALL, a packet socket receives the frames of every interface
// until bind names one, and those frames stay queued after bind (they can
// reach a guest, or be counted by a benchmark); the protocol belongs in
// bind, with the interface (OpenPacketSocket,
// TestHostPacketSocketSeesOnlyItsInterface).
func TestPacketSocketsOpenWithProtocolZero(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	files, sockets := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
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
			if !ok || len(call.Args) != 3 || !isPkgSel(call.Fun, "unix", "Socket") || !isPkgSel(call.Args[0], "unix", "AF_PACKET") {
				return true
			}
			sockets++
			if lit, ok := call.Args[2].(*ast.BasicLit); !ok || lit.Value != "0" {
				t.Errorf("%s: AF_PACKET socket opened with a protocol other than 0: open it with 0 and give the protocol to bind with the interface",
					fset.Position(call.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 || sockets == 0 {
		t.Fatalf("scanned %d files and found %d AF_PACKET sockets: the scan is broken", files, sockets)
	}
}

func isPkgSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
