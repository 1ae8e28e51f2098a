package hostnic

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// faces are the packages that serve a kind of VM (a hand-run QEMU, a
// libvirt domain through the hook or the libvirt face, a KubeVirt pod
// through the CNI plugin): each makes the host side of its NICs through
// this package (a libvirt client package that only talks to libvirtd is
// no face).
var faces = []string{"attach", "hook", "libvirtattach", "cni"}

// hostObjectCalls make, bind or delete a NIC's host objects: only this
// package calls them for a face.
var hostObjectCalls = map[string][]string{
	"macvtap":  {"CreateTap", "CreateMacvtap", "DeleteLinkIfSame"},
	"vdpa":     {"Bind", "Remove", "VhostVDPAPath", "Dial"},
	"vhostnet": {"Open"},
}

// TestFacesUseHostnic: no face imports another face (nor this package
// a face), and no face's product code creates, binds, opens or deletes a
// tap, macvtap or vdpa device itself: that is hostnic's, so that a fix
// lands once.
func TestFacesUseHostnic(t *testing.T) {
	root := srcscan.Root(t)
	dirs := append([]string{"hostnic"}, faces...)
	const mod = "github.com/netctl/netctl/"
	srcscan.Walk(t, srcscan.Options{Dirs: dirs, MinFiles: 20}, func(path string, fset *token.FileSet, f *ast.File) {
		rel, _ := filepath.Rel(root, path)
		own := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, face := range faces {
				if (p == mod+face || strings.HasPrefix(p, mod+face+"/")) && face != own {
					t.Errorf("%s imports %s: a face imports no other face, and hostnic none", rel, p)
				}
			}
		}
		if own == "hostnic" || strings.HasSuffix(path, "_test.go") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				for pkg, names := range hostObjectCalls {
					for _, name := range names {
						if srcscan.IsSel(c.Fun, pkg, name) {
							t.Errorf("%s: %s.%s: a face makes, opens or deletes host objects through hostnic", fset.Position(c.Pos()), pkg, name)
						}
					}
				}
			}
			return true
		})
	})
}
