package gather

import (
	"context"
	"go/ast"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
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
	srcscan.Walk(t, srcscan.Options{SkipTests: true, MinFiles: 50}, func(path string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && srcscan.IsSel(call.Fun, "context", "TODO") {
				t.Errorf("%s: context.TODO(): pass the caller's context", fset.Position(call.Pos()))
			}
			return true
		})
	})
}
