package diagnose

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// effectful are the packages (and path prefixes) the pure explanation must
// not depend on: each opens a device or a socket, or is x/sys, which
// does. internal/linux is among them because it imports x/sys.
var effectful = []string{
	"github.com/netctl/netctl/qmp",
	"github.com/netctl/netctl/vhostnet",
	"github.com/netctl/netctl/vdpa",
	"github.com/netctl/netctl/macvtap",
	"github.com/netctl/netctl/zerocopy",
	"github.com/netctl/netctl/internal/linux",
	"github.com/netctl/netctl/internal/vhost",
	"github.com/netctl/netctl/policy/probe",
	"github.com/netctl/netctl/policy/diagnose/gather",
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/mdlayher/netlink",
	"github.com/mdlayher/genetlink",
	"github.com/mdlayher/socket",
	"golang.org/x/sys",
	"net", // sockets; net/netip and the like are fine, and os (files) is too
}

func isEffectful(pkg string) bool {
	return slices.ContainsFunc(effectful, func(e string) bool {
		if e == "net" {
			return pkg == e
		}
		return pkg == e || strings.HasPrefix(pkg, e+"/")
	})
}

// importGraph runs go list -deps on pkg and returns each dependency's
// imports.
func importGraph(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	goBin := goCommand(t)
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	g := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		g[f[0]] = f[1:]
	}
	return g
}

// chain is the import path from root to dep, found breadth first.
func chain(g map[string][]string, root, dep string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append([]string{p}, path...)
			}
			return path
		}
		for _, i := range g[p] {
			if _, seen := prev[i]; !seen {
				prev[i] = p
				queue = append(queue, i)
			}
		}
	}
	return nil
}

// TestExplanationIsPure: the explanation (Snapshot, Load, Decode, Explain,
// the table) imports nothing that opens a device or a socket; gathering
// lives in policy/diagnose/gather. What comes in through package policy
// (diagnose reads its offload table) counts too, and is reported with the
// chain that brings it in.
func TestExplanationIsPure(t *testing.T) {
	const self = "github.com/netctl/netctl/policy/diagnose"
	const policy = "github.com/netctl/netctl/policy"
	g := importGraph(t, self)
	var own, viaPolicy []string
	for pkg := range g {
		if !isEffectful(pkg) {
			continue
		}
		// Is pkg reachable without passing through package policy?
		h := map[string][]string{}
		for p, is := range g {
			if p != policy {
				h[p] = is
			}
		}
		if c := chain(h, self, pkg); c != nil {
			own = append(own, strings.Join(c, " -> "))
		} else {
			viaPolicy = append(viaPolicy, strings.Join(chain(g, self, pkg), " -> "))
		}
	}
	slices.Sort(own)
	slices.Sort(viaPolicy)
	for _, c := range own {
		t.Errorf("the pure explanation depends on an effectful package: %s", c)
	}
	for _, c := range viaPolicy {
		t.Errorf("the pure explanation depends on an effectful package through policy: %s", c)
	}
}

// goCommand finds the go command (go test puts GOROOT/bin first in PATH).
func goCommand(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	return p
}
