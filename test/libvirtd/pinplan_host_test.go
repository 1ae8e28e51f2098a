package libvirtd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/pool"
)

// TestHostLibvirtdHookPinPlan: with the plan of the 6.1 and 6.12 test
// VMs in the hook's config (no RING_RESET: 6.1's vhost-net lacks it),
// netctl hook pin writes what <driver> cannot say into the definition:
// the managed interface gets <alias name='ua-netctl-MAC'/> and a
// <qemu:override> sets queue_reset=false on it (libvirt's own dumpxml
// --inactive, which libvirt accepted at define), nothing else changes
// but its <driver>, the namespace and those two; the next start's QEMU
// command line has queue_reset=false on that NIC (QEMU 7.2 here, which
// offers RING_RESET by default) and not on the unmanaged one; a second
// pin changes nothing. The first pin runs with no QEMU in PATH and still
// writes no USO property (the plan leaves USO out, and libvirt's QEMU
// 7.2 has no host_uso: it would refuse to start). The interface removed
// and added again (virsh detach-interface/attach-device --config, which
// keep the override naming no device) gets its alias back from the next
// pin, so the start's QEMU has queue_reset=false on it. The user's own
// queue_reset=true in that override is kept, and pin says the interface
// does not hold the plan (not that the domain is pinned). A --plan hotplug through the libvirt face onto
// the running domain (machine type 7.2, which keeps queue_reset on) is
// refused, leaving no record and no tap.
func TestHostLibvirtdHookPinPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newPlanEnv(t, ctx)
	d := e.d
	var extraEnv []string
	netctl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, e.bin, args...)
		cmd.Env = append(append(os.Environ(), "NETCTL_RUN_DIR="+state.DefaultDir), extraEnv...)
		b, err := cmd.CombinedOutput()
		out := string(b)
		t.Logf("netctl %s: %v\n%s", strings.Join(args, " "), err, out)
		return out, err
	}
	if out, err := exec.Command("ip", "tuntap", "add", "dev", "othtap0", "mode", "tap", "vnet_hdr").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v\n%s", err, out)
	}
	defer exec.Command("ip", "link", "del", "othtap0").Run()

	g, err := d.NewGuest(ctx, "pinplan", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, "domain.xml"), []byte(g.DomainXML(netctlMetadata, netctlIface(`<driver queues='2'/>`), unmanagedIface)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", filepath.Join(g.Dir, "domain.xml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	defer d.Virsh("undefine", "pinplan")
	before, err := d.Virsh("dumpxml", "--inactive", "pinplan")
	if err != nil {
		t.Fatal(err)
	}
	// The first pin finds no QEMU in PATH (as on a host whose QEMU is
	// /usr/libexec/qemu-kvm): the QEMU libvirt starts domains with (7.2
	// here) has no host_uso or guest_uso4/6, which the plan leaves out
	// (6.1 has no USO), so the pin must not write them: QEMU would refuse
	// to start ("Property 'virtio-net-pci.host_uso' not found").
	extraEnv = []string{"PATH=/usr/sbin:/sbin"}
	out, err := netctl("hook", "pin", "pinplan")
	extraEnv = nil
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"+ <qemu:override> on alias ua-netctl-525400780102: queue_reset=false", "+ <alias name='ua-netctl-525400780102'/>", "defined:"} {
		if !strings.Contains(out, w) {
			t.Errorf("hook pin lacks %q", w)
		}
	}
	after, err := d.Virsh("dumpxml", "--inactive", "pinplan")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the pinned definition:\n%s", after)
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(after); err != nil {
		t.Fatal(err)
	}
	if dom.QEMUOverride == nil || len(dom.QEMUOverride.Devices) != 1 || dom.QEMUOverride.Devices[0].Alias != "ua-netctl-525400780102" {
		t.Fatalf("the definition's <qemu:override>: %+v", dom.QEMUOverride)
	}
	props := map[string]string{}
	for _, p := range dom.QEMUOverride.Devices[0].Frontend.Properties {
		props[p.Name] = p.Type + "/" + p.Value
	}
	if props["queue_reset"] != "bool/false" || len(props) != 1 {
		t.Errorf("override properties %v: want queue_reset bool/false alone (QEMU 7.2 has no USO properties)", props)
	}
	for _, x := range dom.Devices.Interfaces {
		a := ""
		if x.Alias != nil {
			a = x.Alias.Name
		}
		if want := map[bool]string{true: "ua-netctl-525400780102", false: ""}[x.MAC.Address == "52:54:00:78:01:02"]; a != want {
			t.Errorf("interface %s alias %q, want %q", x.MAC.Address, a, want)
		}
	}
	// Nothing else moved: the definition without the managed interface's
	// <driver> and alias, the override and the namespace is the one before.
	strip := func(x string) string {
		x = withoutDriverOf(t, x, "52:54:00:78:01:02")
		x = strings.Replace(x, " xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'", "", 1)
		x = strings.Replace(x, "      <alias name='ua-netctl-525400780102'/>\n", "", 1)
		if i, j := strings.Index(x, "  <qemu:override>"), strings.Index(x, "</qemu:override>\n"); i >= 0 && j > i {
			x = x[:i] + x[j+len("</qemu:override>\n"):]
		}
		return x
	}
	if strip(after) != withoutDriverOf(t, before, "52:54:00:78:01:02") {
		t.Errorf("the definition changed beyond the pin:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if out, _ := netctl("hook", "pin", "pinplan"); !strings.Contains(out, "pinned already") {
		t.Errorf("a second hook pin does not say the domain is pinned already")
	}
	if again, _ := d.Virsh("dumpxml", "--inactive", "pinplan"); again != after {
		t.Errorf("a second hook pin changed the definition")
	}
	// The interface removed and added again (virsh detach-interface
	// --config keeps the <qemu:override>, which then names no device):
	// pin gives the new interface the alias, so the override applies.
	mustVirsh(t, d, "detach-interface", "pinplan", "ethernet", "--mac", "52:54:00:78:01:02", "--config")
	if x := mustVirsh(t, d, "dumpxml", "--inactive", "pinplan"); !strings.Contains(x, "alias='ua-netctl-525400780102'") || strings.Contains(x, "<alias name='ua-netctl-525400780102'/>") {
		t.Fatalf("after detach-interface --config, want the override kept and no interface with its alias:\n%s", x)
	}
	ifaceFile := filepath.Join(g.Dir, "iface.xml")
	if err := os.WriteFile(ifaceFile, []byte(netctlIface(`<driver queues='2'/>`)), 0o644); err != nil {
		t.Fatal(err)
	}
	mustVirsh(t, d, "attach-device", "pinplan", ifaceFile, "--config")
	if out, err := netctl("hook", "pin", "pinplan"); err != nil || !strings.Contains(out, "+ <alias name='ua-netctl-525400780102'/>") {
		t.Errorf("hook pin after the interface came back: want its alias added (%v)", err)
	}
	if x := mustVirsh(t, d, "dumpxml", "--inactive", "pinplan"); !strings.Contains(x, "<alias name='ua-netctl-525400780102'/>") || strings.Count(x, "<qemu:device ") != 1 {
		t.Errorf("the definition after the second pin: want the interface's alias back and the one override:\n%s", x)
	}

	// The next start: QEMU gets queue_reset=false on the managed NIC.
	if out, err := d.Virsh("start", "pinplan"); err != nil {
		t.Fatalf("%v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	defer d.Virsh("destroy", "pinplan")
	args := qemuArgs(t, "pinplan")
	dev, _ := qemuNIC(t, args, "52:54:00:78:01:02")
	t.Logf("QEMU's -device: %v", dev)
	if dev["queue_reset"] != "off" || dev["id"] != "ua-netctl-525400780102" {
		t.Errorf("QEMU's virtio-net-pci for the pinned NIC: queue_reset=%q id=%q, want off and ua-netctl-525400780102", dev["queue_reset"], dev["id"])
	}
	if other, _ := qemuNIC(t, args, "52:54:00:78:09:09"); other["queue_reset"] != "" {
		t.Errorf("the unmanaged NIC got queue_reset=%s", other["queue_reset"])
	}

	// A hotplug under the plan: libvirt cannot pin queue_reset on it.
	recs, taps := lvRecords(), lvTaps()
	out, err = netctl("attach", "--vm", "pinplan", "--id", "hp1", "--mac", "52:54:00:78:05:05", "--plan", "/etc/netctl/pool.json")
	if err == nil || !strings.Contains(out, "queue_reset=off") || !strings.Contains(out, "netctl hook pin") {
		t.Errorf("attach --plan onto a 7.2 machine: want the refusal naming queue_reset=off and what to do")
	}
	if r, tp := lvRecords(), lvTaps(); len(r) != len(recs) || len(tp) != len(taps) {
		t.Errorf("the refused attach left records %v (before %v) or taps %v (before %v)", r, recs, tp, taps)
	}
	live, _ := d.Virsh("dumpxml", "pinplan")
	if strings.Contains(live, "52:54:00:78:05:05") {
		t.Errorf("the refused NIC is in the domain")
	}

	// The user sets queue_reset=true in the override: pin does not
	// rewrite it, and does not say the domain is pinned.
	def := mustVirsh(t, d, "dumpxml", "--inactive", "pinplan")
	userDef := strings.Replace(def, "name='queue_reset' type='bool' value='false'", "name='queue_reset' type='bool' value='true'", 1)
	if userDef == def {
		t.Fatalf("no queue_reset override to change:\n%s", def)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, "user.xml"), []byte(userDef), 0o644); err != nil {
		t.Fatal(err)
	}
	mustVirsh(t, d, "define", filepath.Join(g.Dir, "user.xml"))
	out, err = netctl("hook", "pin", "pinplan")
	if err != nil || !strings.Contains(out, "<qemu:override> not written") || strings.Contains(out, "pinned already") || !strings.Contains(out, "does not hold the pool's plan") {
		t.Errorf("hook pin over the user's queue_reset=true: want the override kept, said, and no 'pinned already' (%v)", err)
	}
	if x := mustVirsh(t, d, "dumpxml", "--inactive", "pinplan"); !strings.Contains(x, "name='queue_reset' type='bool' value='true'") {
		t.Errorf("hook pin rewrote the user's override:\n%s", x)
	}
}

// TestHostLibvirtdHookPinPlanTransientDryRun: with a pool plan in the
// hook config, netctl hook pin --dry-run on a transient domain (virsh
// create: its only XML is the live one, with the aliases libvirt made,
// net0) shows the pin to start it with, <qemu:override> properties
// included, defines nothing and leaves the domain transient.
func TestHostLibvirtdHookPinPlanTransientDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newPlanEnv(t, ctx)
	d := e.d
	g, err := d.NewGuest(ctx, "trans", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(""))); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	defer d.Virsh("destroy", "trans")
	out, err := e.netctl("hook", "pin", "--dry-run", "trans")
	t.Logf("netctl hook pin --dry-run trans: %v\n%s", err, out)
	if err != nil || !strings.Contains(string(out), "queue_reset=false") || !strings.Contains(string(out), "dry run") {
		t.Errorf("hook pin --dry-run of a transient domain: want the pin shown, queue_reset=false included")
	}
	if info := mustVirsh(t, d, "dominfo", "trans"); !strings.Contains(info, "Persistent:     no") {
		t.Errorf("the dry run made the domain persistent:\n%s", info)
	}
}

// newPlanEnv is newLvEnv with the plan of the 6.1 and 6.12 test VMs in
// the hook's config (/etc/netctl/pool.json; the hook reads its config at
// each call).
func newPlanEnv(t *testing.T, ctx context.Context) *lvEnv {
	t.Helper()
	e := newLvEnv(t, ctx)
	plan, _ := pool.Of(t, "probe-6.1.json", "probe-6.12.json")
	pj, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/netctl/pool.json", pj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/netctl/hook.json", []byte(`{"timeout": "20s", "plan": "/etc/netctl/pool.json"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}
