package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
)

const testdata = "../../policy/testdata/"

// TestPlanDropsUSO: netctl plan on the probe output of the 6.12 and 6.1
// VMs (saved in policy/testdata) names the hosts by their hostname, drops
// USO and RING_RESET, says why, and prints the properties that enforce it.
func TestPlanDropsUSO(t *testing.T) {
	out := run(t, "plan", testdata+"probe-6.12.json", testdata+"probe-6.1.json")
	for _, want := range []string{"safe on all 2 hosts (vm-6-1 vm-6-12):", "GUEST_TSO4",
		"dropped GUEST_USO4: missing on vm-6-1 (tun on 6.1.0-57-amd64 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2)",
		"dropped RING_RESET: missing on vm-6-1 (this kernel's vhost-net does not offer it)",
		"QEMU virtio-net-pci properties: guest_uso4=off,guest_uso6=off,host_uso=off,queue_reset=off\n",
		"note: vm-6-1: QEMU version unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if first := strings.SplitN(out, "\n", 2)[0]; strings.Contains(first, "USO") || strings.Contains(first, "RING_RESET") {
		t.Errorf("USO offered as safe:\n%s", out)
	}
	var p policy.PlanResult
	if err := json.Unmarshal([]byte(run(t, "plan", "-j", "--qemu", "7.2.22", testdata+"probe-6.12.json", testdata+"probe-6.1.json")), &p); err != nil {
		t.Fatal(err)
	}
	// QEMU 7.2 has no USO properties: named, not emitted.
	if _, set := p.QEMU["guest_uso4"]; set || p.Unavailable["guest_uso4"] == "" || p.QEMU["queue_reset"] != "off" {
		t.Errorf("plan -j --qemu 7.2.22: properties %v, unavailable %v", p.QEMU, p.Unavailable)
	}
}

// TestPlanDropsWhatNoHostOffers: a bit that no host offers gets its
// "dropped" line with the reason, not only its property; one reason shared
// by every host is said once.
func TestPlanDropsWhatNoHostOffers(t *testing.T) {
	out := run(t, "plan", testdata+"probe-6.1.json")
	for _, want := range []string{
		"dropped GUEST_USO4: missing on vm-6-1 (tun on 6.1.0-57-amd64 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2)\n",
		"dropped HOST_USO: missing on vm-6-1 (tun on 6.1.0-57-amd64 takes no USO frames",
		"dropped RING_RESET: missing on vm-6-1 (this kernel's vhost-net does not offer it)\n",
		"QEMU virtio-net-pci properties: guest_uso4=off,guest_uso6=off,host_uso=off,queue_reset=off\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan on one 6.1 host lacks %q:\n%s", want, out)
		}
	}
	out = run(t, "plan", "--profile", "compat", testdata+"probe-6.12.json", testdata+"probe-6.1.json")
	for _, want := range []string{
		"dropped GUEST_ECN: missing on all 2 hosts (the compat profile offers only checksum and TSO, which every supported kernel honours)\n",
		"dropped HOST_UFO: missing on all 2 hosts (the compat profile",
		"dropped RING_RESET: missing on vm-6-1 (this kernel's vhost-net does not offer it)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --profile compat lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanUsageErrors: no files, a file that is not a probe document, two
// probes of one host: a clear message and exit code 2.
func TestPlanUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, err := os.ReadFile(testdata + "probe-6.1.json")
	if err != nil {
		t.Fatal(err)
	}
	noSchema := strings.Replace(string(old), `"schema":"netctl.probe/v1",`, "", 1)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "takes at least 1 argument(s) (HOST.json...), got 0"},
		{[]string{write("diag.json", `{"format":"netctl.diagnose/v1","status":{}}`)}, "no \"schema\" field, so not a netctl probe document"},
		{[]string{write("old.json", noSchema)}, "no \"schema\" field"},
		{[]string{write("list.json", `[1,2]`)}, "not a JSON object"},
		{[]string{write("other.json", `{"schema":"netctl.probe/v9","hostname":"a","kernel":"6.1"}`)}, `schema "netctl.probe/v9": this netctl reads "netctl.probe/v1"`},
		{[]string{write("big.json", "{"+strings.Repeat(" ", 2<<20)+"}")}, "more than 1048576 bytes"},
		{[]string{testdata + "probe-6.1.json", write("copy.json", string(old))}, "probe-6.1.json and " + dir + "/copy.json are both probes of host vm-6-1"},
	} {
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run(append([]string{"netctl", "plan"}, c.args...))
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %v: exit %d, %v; want exit 2 and %q", c.args, exitCode(err), err, c.want)
		}
	}
}

// TestProbeUsageErrors: a bad --dev is refused before anything is probed,
// with exit code 2.
func TestProbeUsageErrors(t *testing.T) {
	for _, dev := range []string{"", "a-name-of-16-chr"} {
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		err := app.Run([]string{"netctl", "probe", "--dev", dev})
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "a device name has 1 to 15 characters") || out.Len() != 0 {
			t.Errorf("probe --dev %q: exit %d, %v, printed %q", dev, exitCode(err), err, out.String())
		}
	}
}
