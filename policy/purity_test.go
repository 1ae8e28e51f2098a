package policy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPolicyIsPure: the decisions and the host description import nothing
// that touches the kernel, so they can be tested, fuzzed and run anywhere
// (netctl plan on a laptop).
func TestPolicyIsPure(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go list -deps: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".", "./host").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %v", deps)
	}
	forbidden := []string{
		"github.com/netctl/netctl/vhostnet", "github.com/netctl/netctl/vdpa", "github.com/netctl/netctl/macvtap",
		"github.com/netctl/netctl/zerocopy", "github.com/netctl/netctl/internal/linux", "github.com/netctl/netctl/internal/vhost",
		"github.com/netctl/netctl/policy/probe", "github.com/netctl/netctl/qmp",
		"github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/mdlayher/netlink",
		"github.com/mdlayher/genetlink", "github.com/mdlayher/socket", "golang.org/x/sys",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("policy depends on %s", d)
			}
		}
	}
}
