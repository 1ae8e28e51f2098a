package libvirtd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/libvirtd"
)

// unmanagedIface is an interface netctl does not manage (no metadata
// names its MAC, and the config manages listed interfaces only), on a tap
// the test makes.
const unmanagedIface = `    <interface type='ethernet'>
      <mac address='52:54:00:78:09:09'/>
      <target dev='othtap0' managed='no'/>
      <model type='virtio'/>
      <driver name='qemu'>
        <host csum='off'/>
      </driver>
    </interface>`

// TestHostLibvirtdHookPin: netctl hook pin on a defined domain with one
// interface netctl manages and one it does not: --dry-run prints the
// diff and defines nothing; pin defines a persistent XML that differs
// from the one before only in the managed interface's <driver> (libvirt's
// own dumpxml --inactive, diffed line by line), with name='qemu' (this
// host has no vhost-net), queues='2' and every offload attribute; a
// domain with only an unmanaged interface is unchanged byte for byte; the
// next start's QEMU command line (/proc/PID/cmdline of the QEMU libvirt
// starts) carries the pinned properties (profile compat: ECN and UFO
// off); before the pin, with no <driver name>, hook status reads from
// QEMU's command line that vhost-net is off; hook status shows what runs
// (from the live XML) beside what was decided; a second pin changes
// nothing, and after a profile change only pin --redecide re-decides.
func TestHostLibvirtdHookPin(t *testing.T) {
	bin := buildNetctl(t, t.TempDir())
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := libvirtd.New(t)
	for _, p := range []string{"/etc/netctl", "/var/log/netctl"} {
		if err := d.Private(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("/etc/netctl/hook.json", []byte(`{"timeout": "20s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "hook", "install", "--dir", d.HookDir).CombinedOutput(); err != nil {
		t.Fatalf("netctl hook install: %v\n%s", err, out)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	netctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("netctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("netctl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	dumpInactive := func(name string) string {
		t.Helper()
		out, err := d.Virsh("dumpxml", "--inactive", name)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A domain with nothing for netctl: untouched, byte for byte.
	og, err := d.NewGuest(ctx, "other", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(og.Dir, "domain.xml"), []byte(og.DomainXML("", unmanagedIface)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", filepath.Join(og.Dir, "domain.xml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	otherBefore := dumpInactive("other")
	out := netctl("hook", "pin", "other")
	if !strings.Contains(out, "netctl manages no interface of domain other") {
		t.Errorf("hook pin other does not say netctl manages nothing in it")
	}
	if after := dumpInactive("other"); after != otherBefore {
		t.Errorf("hook pin changed a domain netctl does not manage:\nbefore:\n%s\nafter:\n%s", otherBefore, after)
	}

	// The managed domain.
	g, err := d.NewGuest(ctx, "pinme", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, "domain.xml"), []byte(g.DomainXML(netctlMetadataWith(`profile="compat"`), netctlIface(`<driver queues='2'/>`), unmanagedIface)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", filepath.Join(g.Dir, "domain.xml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before := dumpInactive("pinme")
	uuid := strings.TrimSpace(mustVirsh(t, d, "domuuid", "pinme"))

	// Unpinned first: <driver queues='2'/> leaves the backend to libvirt,
	// whose live XML then says nothing of it; hook status reads what runs
	// from QEMU's command line (no vhost-net here) beside the decision.
	// The unmanaged interface's tap is the operator's, made beforehand.
	if out, err := exec.Command("ip", "tuntap", "add", "dev", "othtap0", "mode", "tap", "vnet_hdr").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v\n%s", err, out)
	}
	if out, err := d.Virsh("start", "pinme"); err != nil {
		t.Fatalf("%v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	st0 := netctl("hook", "status", "pinme")
	for _, w := range []string{"decided backend userspace", "runs: ethernet nctllv0 (net0): no driver name (libvirt's default: vhost-net if it could open /dev/vhost-net, else QEMU's own); vhost-net off (QEMU's command line), 2 queue(s)"} {
		if !strings.Contains(st0, w) {
			t.Errorf("hook status pinme, unpinned, lacks %q", w)
		}
	}
	if out, err := d.Virsh("destroy", "pinme"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out = netctl("hook", "pin", "--dry-run", uuid)
	for _, want := range []string{"interface 52:54:00:78:01:02 (tap nctllv0): backend userspace", "  - <driver queues='2'/>", "  + <driver name=\"qemu\"", "dry run: nothing defined"} {
		if !strings.Contains(out, want) {
			t.Errorf("hook pin --dry-run lacks %q", want)
		}
	}
	if strings.Contains(out, "52:54:00:78:09:09") {
		t.Errorf("hook pin --dry-run names the unmanaged interface")
	}
	if now := dumpInactive("pinme"); now != before {
		t.Errorf("hook pin --dry-run changed the definition")
	}
	out = netctl("hook", "pin", "--libvirt", "qemu+unix:///system?socket=/run/libvirt/libvirt-sock", "pinme")
	if !strings.Contains(out, "defined: libvirt starts the domain with these at its next start") {
		t.Errorf("hook pin does not say it defined the domain")
	}
	after := dumpInactive("pinme")
	b, a := withoutDriverOf(t, before, "52:54:00:78:01:02"), withoutDriverOf(t, after, "52:54:00:78:01:02")
	if b != a {
		t.Errorf("the persistent XML changed outside the managed interface's <driver>:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if before == after {
		t.Fatal("hook pin changed nothing")
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(after); err != nil {
		t.Fatal(err)
	}
	var pinned *libvirtxml.DomainInterfaceDriver
	for _, x := range dom.Devices.Interfaces {
		if x.MAC != nil && x.MAC.Address == "52:54:00:78:01:02" {
			pinned = x.Driver
		}
	}
	if pinned == nil || pinned.Name != "qemu" || pinned.Queues != 2 || pinned.Host == nil || pinned.Guest == nil ||
		pinned.Host.CSum == "" || pinned.Host.TSO4 == "" || pinned.Host.MrgRXBuf == "" || pinned.Guest.CSum == "" || pinned.Guest.TSO4 == "" || pinned.Guest.UFO == "" {
		t.Fatalf("pinned driver %+v", pinned)
	}
	t.Logf("pinned: host %+v guest %+v event_idx %s", *pinned.Host, *pinned.Guest, pinned.EventIDX)
	// Profile compat offers checksum and TSO only: ECN and UFO are
	// pinned off, both ways.
	if pinned.Host.TSO4 != "on" || pinned.Host.ECN != "off" || pinned.Host.UFO != "off" || pinned.Guest.ECN != "off" || pinned.Guest.UFO != "off" {
		t.Errorf("pinned for profile compat: host %+v guest %+v", *pinned.Host, *pinned.Guest)
	}
	if out := netctl("hook", "pin", "pinme"); !strings.Contains(out, "pinned already") {
		t.Errorf("a second hook pin does not say the domain is pinned already")
	}
	if again := dumpInactive("pinme"); again != after {
		t.Errorf("a second hook pin changed the definition")
	}

	// The next start.
	if out, err := d.Virsh("start", "pinme"); err != nil {
		t.Fatalf("%v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	args := qemuArgs(t, "pinme")
	dev, netdev := qemuNIC(t, args, "52:54:00:78:01:02")
	t.Logf("QEMU's -device: %v\n-netdev: %v", dev, netdev)
	want := map[string]string{"mq": "on", "vectors": "6",
		"csum": pinned.Host.CSum, "host_tso4": pinned.Host.TSO4, "host_tso6": pinned.Host.TSO6, "host_ecn": pinned.Host.ECN,
		"host_ufo": pinned.Host.UFO, "mrg_rxbuf": pinned.Host.MrgRXBuf, "guest_csum": pinned.Guest.CSum, "guest_tso4": pinned.Guest.TSO4,
		"guest_tso6": pinned.Guest.TSO6, "guest_ecn": pinned.Guest.ECN, "guest_ufo": pinned.Guest.UFO, "event_idx": pinned.EventIDX}
	for k, v := range want {
		if got := dev[k]; got != v {
			t.Errorf("QEMU's virtio-net-pci %s=%q, want %q (pinned)", k, got, v)
		}
	}
	if v, ok := netdev["vhost"]; ok && v != "off" {
		t.Errorf("QEMU's tap netdev vhost=%s, want off for <driver name='qemu'>", v)
	}
	if fds := netdev["fds"]; len(strings.Split(fds, ":")) != 2 {
		t.Errorf("QEMU's tap netdev fds=%q, want two queues", fds)
	}
	other, _ := qemuNIC(t, args, "52:54:00:78:09:09")
	if other["csum"] != "off" || other["mq"] == "on" {
		t.Errorf("the unmanaged interface's -device %v: want csum off as its own XML says", other)
	}

	st := netctl("hook", "status", "pinme")
	for _, w := range []string{"libvirt: running", "decided backend userspace", "runs: ethernet nctllv0 (net0): driver qemu (QEMU's own virtio-net, no vhost); vhost-net off (QEMU's command line), 2 queue(s)"} {
		if !strings.Contains(st, w) {
			t.Errorf("hook status pinme lacks %q", w)
		}
	}
	js := netctl("hook", "status", "--json")
	var recs []struct {
		Name string `json:"domain"`
		Live struct {
			State      string `json:"state"`
			Interfaces map[string]struct {
				Driver   string `json:"driver"`
				VhostNet string `json:"vhost_net"`
			} `json:"interfaces"`
		} `json:"live"`
	}
	if err := json.Unmarshal([]byte(js), &recs); err != nil || len(recs) != 1 || recs[0].Live.State != "running" || recs[0].Live.Interfaces["52:54:00:78:01:02"].Driver != "qemu" ||
		recs[0].Live.Interfaces["52:54:00:78:01:02"].VhostNet != "off" {
		t.Errorf("hook status --json: %v %+v", err, recs)
	}
	if out, err := d.Virsh("destroy", "pinme"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st := netctl("hook", "status", "pinme"); !strings.Contains(st, "prepared nothing") {
		t.Errorf("hook status after destroy: want no record")
	}
	// A new profile in the metadata: the pinned attributes read as forced
	// and hold the old decision, until pin --redecide.
	cur := dumpInactive("pinme")
	re := strings.NewReplacer(`profile="compat"`, `profile="throughput"`, `profile='compat'`, `profile='throughput'`).Replace(cur)
	if re == cur {
		t.Fatalf("no profile compat in the definition:\n%s", cur)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, "domain.xml"), []byte(re), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", filepath.Join(g.Dir, "domain.xml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out := netctl("hook", "pin", "pinme"); !strings.Contains(out, "pinned already") {
		t.Errorf("hook pin after the profile change: want the pinned attributes to hold")
	}
	if out := netctl("hook", "pin", "--redecide", "pinme"); !strings.Contains(out, `ecn="on"`) {
		t.Errorf("hook pin --redecide for profile throughput: want ECN pinned on")
	}
	if x := dumpInactive("pinme"); !strings.Contains(x, "ecn='on'") || withoutDriverOf(t, x, "52:54:00:78:01:02") != withoutDriverOf(t, re, "52:54:00:78:01:02") {
		t.Errorf("after hook pin --redecide:\n%s", x)
	}
	for _, n := range []string{"pinme", "other"} {
		if out, err := d.Virsh("undefine", n); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	exec.Command("ip", "link", "del", "othtap0").Run()
}

// qemuArgs is the command line of the QEMU libvirt runs for domain name.
func qemuArgs(t *testing.T, name string) []string {
	t.Helper()
	pidb, err := os.ReadFile("/run/libvirt/qemu/" + name + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
}

func mustVirsh(t *testing.T, d *libvirtd.Daemon, args ...string) string {
	t.Helper()
	out, err := d.Virsh(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withoutDriverOf is domain XML (as libvirt formats it: one element per
// line) without the <driver> element of the interface with mac.
func withoutDriverOf(t *testing.T, x, mac string) string {
	t.Helper()
	lines := strings.Split(x, "\n")
	var out []string
	inIface, mine, inDriver := false, false, false
	var iface []string
	for _, l := range lines {
		s := strings.TrimSpace(l)
		switch {
		case inDriver:
			if s == "</driver>" {
				inDriver = false
			}
			continue
		case strings.HasPrefix(s, "<interface "):
			inIface, mine, iface = true, false, nil
		}
		if !inIface {
			out = append(out, l)
			continue
		}
		if strings.Contains(s, "<mac address='"+mac+"'/>") {
			mine = true
		}
		if strings.HasPrefix(s, "<driver") && !strings.HasSuffix(s, "/>") {
			inDriver = true
		}
		if strings.HasPrefix(s, "<driver") {
			iface = append(iface, "\x00DRIVER\x00"+l)
		} else {
			iface = append(iface, l)
		}
		if s == "</interface>" {
			inIface = false
			for _, il := range iface {
				if strings.HasPrefix(il, "\x00DRIVER\x00") {
					if mine {
						continue
					}
					il = strings.TrimPrefix(il, "\x00DRIVER\x00")
				}
				out = append(out, il)
			}
		}
	}
	if inIface || inDriver {
		t.Fatalf("unbalanced domain XML:\n%s", x)
	}
	return strings.Join(out, "\n")
}

// qemuNIC finds the virtio-net-pci -device with mac in QEMU's arguments
// and the -netdev it names, as property maps (JSON true/false as on/off).
func qemuNIC(t *testing.T, args []string, mac string) (dev, netdev map[string]string) {
	t.Helper()
	var devs, netdevs []map[string]string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-device":
			devs = append(devs, props(args[i+1]))
		case "-netdev":
			netdevs = append(netdevs, props(args[i+1]))
		}
	}
	for _, d := range devs {
		if d["mac"] == mac {
			for _, n := range netdevs {
				if n["id"] == d["netdev"] {
					return d, n
				}
			}
			t.Fatalf("QEMU has no -netdev %s for %s: %q", d["netdev"], mac, args)
		}
	}
	t.Fatalf("QEMU has no -device with mac %s: %q", mac, args)
	return nil, nil
}

// props reads a -device or -netdev argument, JSON or key=value.
func props(s string) map[string]string {
	m := map[string]string{}
	if strings.HasPrefix(s, "{") {
		var j map[string]any
		if json.Unmarshal([]byte(s), &j) == nil {
			for k, v := range j {
				switch v := v.(type) {
				case bool:
					m[k] = map[bool]string{true: "on", false: "off"}[v]
				case float64:
					m[k] = strconv.FormatFloat(v, 'f', -1, 64)
				case string:
					m[k] = v
				}
			}
		}
		return m
	}
	for i, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok && i == 0 {
			k, v = "driver", kv
		}
		m[k] = v
	}
	return m
}
