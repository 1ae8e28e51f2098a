package macvtap

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// TestPacketSocketsOpenWithProtocolZero scans every Go file of the module
// for an AF_PACKET socket opened with a protocol other than 0. Opened with
// ETH_P_ALL, a packet socket receives the frames of every interface
// until bind names one, and those frames stay queued after bind (they can
// reach a guest, or be counted by a benchmark); the protocol belongs in
// bind, with the interface (OpenPacketSocket,
// TestHostPacketSocketSeesOnlyItsInterface).
func TestPacketSocketsOpenWithProtocolZero(t *testing.T) {
	sockets := 0
	srcscan.Walk(t, srcscan.Options{MinFiles: 50}, func(path string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 3 || !srcscan.IsSel(call.Fun, "unix", "Socket") || !srcscan.IsSel(call.Args[0], "unix", "AF_PACKET") {
				return true
			}
			sockets++
			if lit, ok := call.Args[2].(*ast.BasicLit); !ok || lit.Value != "0" {
				t.Errorf("%s: AF_PACKET socket opened with a protocol other than 0: open it with 0 and give the protocol to bind with the interface",
					fset.Position(call.Pos()))
			}
			return true
		})
	})
	if sockets == 0 {
		t.Fatal("found no AF_PACKET socket: the scan is broken")
	}
}
