package nfd_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

// TestVMNFDWrite: in each VM kernel, netctl nfd write (bin/netctl of
// this tree) writes NFD's feature file with what the kernel has
// (vhost-net on both; vdpa with VDUSE and tap USO on 6.12 only), and
// its featureset is the id netctl plan gives for the same node's
// netctl probe -j alone; a second write replaces the file whole,
// leaving nothing else in the directory; netctl nfd remove removes it.
func TestVMNFDWrite(t *testing.T) {
	k := testenv.VM(t)
	bin, err := filepath.Abs("../bin/netctl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v: run make build first", bin, err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("netctl %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
			}
			t.Fatal(err)
		}
		return string(out)
	}
	dir := filepath.Join(t.TempDir(), "features.d")
	t.Log(run("nfd", "write", "--dir", dir))
	b, err := os.ReadFile(filepath.Join(dir, "netctl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
	got := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			got[k] = v
		}
	}
	tf := map[bool]string{true: "true", false: "false"}
	want := map[string]string{
		"netctl.dev/vhost-net": "true",
		"netctl.dev/vdpa":      tf[k.Has("vdpa")],
		"netctl.dev/tap-uso":   tf[k.Has("tun_uso")],
		"netctl.dev/zerocopy":  "false",
	}
	if k.Has("vdpa") {
		want["netctl.dev/vdpa-mgmtdev.vduse"] = "true"
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("%s=%q on %s, want %q", n, got[n], k.Name, v)
		}
	}
	// The featureset is plan's id for this node alone.
	probeJSON := run("probe", "-j")
	var h host.Description
	if err := json.Unmarshal([]byte(probeJSON), &h); err != nil {
		t.Fatal(err)
	}
	h.QEMU, h.Hostname = host.QEMU{}, "vm" // the VM boots unnamed, which plan refuses
	p, err := policy.Plan([]*host.Description{&h}, policy.Request{})
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(t.TempDir(), "probe.json")
	hb, _ := json.Marshal(h)
	os.WriteFile(pf, hb, 0o644)
	planOut := run("plan", pf)
	if got["netctl.dev/featureset"] != p.ID || !strings.Contains(planOut, p.ID) {
		t.Errorf("featureset %q; plan of this node's probe: %s (netctl plan says:\n%s)", got["netctl.dev/featureset"], p.ID, planOut)
	}
	run("nfd", "write", "--dir", dir, "--expiry", "10m")
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "netctl" {
		t.Errorf("after a second write the directory holds %v", ents)
	}
	run("nfd", "remove", "--dir", dir)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("after nfd remove the directory holds %v", ents)
	}
}
