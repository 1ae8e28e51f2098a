package probe

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// TestCallersTestSentinelsNotErrnos: policy and the command line call
// netctl's public packages, which map the kernel's errnos to the shared
// sentinels (ErrNotSupported, ErrNotAvailable, ...). A caller that tests
// errors.Is(err, unix.ENOTTY) instead depends on how a package talks to
// the kernel; this scan of policy/ and cmd/ fails on any such test.
func TestCallersTestSentinelsNotErrnos(t *testing.T) {
	o := srcscan.Options{Dirs: []string{"policy", "cmd"}, SkipTests: true, MinFiles: 10}
	srcscan.Walk(t, o, func(path string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 || !srcscan.IsSel(call.Fun, "errors", "Is") {
				return true
			}
			if sel, ok := call.Args[1].(*ast.SelectorExpr); ok && srcscan.IsSel(sel, "unix", sel.Sel.Name) && strings.HasPrefix(sel.Sel.Name, "E") {
				t.Errorf("%s: errors.Is(..., unix.%s): test the package's sentinel (ErrNotSupported, ...) instead", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	})
}
