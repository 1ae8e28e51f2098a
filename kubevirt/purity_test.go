package kubevirt

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKubevirtIsPure: the binding plugin's rewrite imports nothing that
// opens a device or touches the kernel's network state (the CNI plugin
// does that, privileged), and nothing that serves or dials: the sidecar
// (kubevirt/sidecar) carries the gRPC server.
func TestKubevirtIsPure(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go list -deps: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
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
		"github.com/netctl/netctl/policy/probe", "github.com/netctl/netctl/hostnic", "github.com/netctl/netctl/attach",
		"github.com/netctl/netctl/hook", "github.com/netctl/netctl/vhostuser",
		"github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/mdlayher/netlink",
		"github.com/mdlayher/genetlink", "google.golang.org/grpc",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("kubevirt depends on %s", d)
			}
		}
	}
}
