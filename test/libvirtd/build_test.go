package libvirtd_test

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// buildNetctl builds netctl as make build lays it out, into dir, and
// returns dir/netctl: the split netctl (no libvirt RPC client, no
// exporter, no sidecar), with netctl-full beside it, which the split one
// runs for what it leaves out. So every command these tests run against
// libvirtd that dials libvirt goes through that hand-over.
func buildNetctl(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "netctl")
	for _, b := range []struct{ tags, out string }{
		{"netctl_split,urfave_cli_no_docs", bin},
		{"urfave_cli_no_docs", filepath.Join(dir, "netctl-full")},
	} {
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, "github.com/netctl/netctl/cmd/netctl").CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b.out, err, out)
		}
	}
	return bin
}
