package libvirtd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/libvirtd"
)

const netctlMetadata = `    <netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
      <netctl:interface mac="52:54:00:78:01:02"/>
    </netctl:hook>`

// netctlMetadataWith is netctlMetadata with more attributes on the
// interface (backend="vhost-net").
func netctlMetadataWith(attrs string) string {
	return strings.Replace(netctlMetadata, `"/>`, `" `+attrs+`/>`, 1)
}

// netctlIface is an interface netctl is asked to manage (by its MAC in
// the metadata); driver is the <driver> element.
func netctlIface(driver string) string {
	return `    <interface type='ethernet'>
      <mac address='52:54:00:78:01:02'/>
      <target dev='nctllv0' managed='no'/>
      <model type='virtio'/>
      ` + driver + `
    </interface>`
}

// TestHostLibvirtdNetctlHook is issue 13's end-to-end test through a real
// libvirtd: netctl hook install writes the hook before the daemon starts;
// a domain whose managed='no' tap netctl prepares boots and answers pings
// across it, destroy releases the tap, a domain asking for vhost-net on
// this host (which has none) is refused with netctl's line in virsh's
// error, and so are a domain forcing an offload on whose prerequisite it
// forces off and one whose netctl metadata asks for backend vhost-net;
// the booted domain's forced offloads that the tap carries pass, and
// hook status shows the backend and profile policy chose. Nothing is
// left: no tap, no record, no domain.
func TestHostLibvirtdNetctlHook(t *testing.T) {
	bin := buildNetctl(t, t.TempDir())
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	out, err := exec.Command(bin, "hook", "install", "--dir", d.HookDir).CombinedOutput()
	if err != nil {
		t.Fatalf("netctl hook install: %v\n%s", err, out)
	}
	t.Logf("netctl hook install: %s", strings.TrimSpace(string(out)))
	start := time.Now()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("libvirtd answered after %v", time.Since(start).Round(time.Millisecond))

	g, err := d.NewGuest(ctx, "nctl", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	// Forced on: what the tap here carries (checksum and TSO both ways).
	forced := `<driver name='qemu' queues='2'><host csum='on' tso4='on'/><guest csum='on' tso4='on'/></driver>`
	if out, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(forced))); err != nil {
		t.Fatalf("%v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	t.Logf("virsh create: %v", time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile("/sys/class/net/nctllv0/tun_flags")
	if err != nil {
		t.Fatalf("the tap netctl prepares: %v\nnetctl's log:\n%s", err, readFile("/var/log/netctl/hook.log"))
	}
	flags, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	const iffTap, iffMultiQueue, iffVnetHdr = 0x2, 0x100, 0x4000
	if flags&(iffTap|iffMultiQueue|iffVnetHdr) != iffTap|iffMultiQueue|iffVnetHdr {
		t.Errorf("nctllv0 tun_flags %#x: want TAP|MULTI_QUEUE|VNET_HDR for <driver queues='2'>", flags)
	}
	st, err := exec.Command(bin, "hook", "status", "nctl").CombinedOutput()
	if err != nil || !strings.Contains(string(st), "nctllv0") {
		t.Errorf("netctl hook status nctl: %v\n%s", err, st)
	}
	t.Logf("netctl hook status nctl:\n%s", st)
	for _, want := range []string{"backend userspace, profile throughput", "forced: <host csum='on'/> <host tso4='on'/> <guest csum='on'/> <guest tso4='on'/>"} {
		if !strings.Contains(string(st), want) {
			t.Errorf("netctl hook status nctl lacks %q", want)
		}
	}
	js, err := exec.Command(bin, "hook", "status", "--json").CombinedOutput()
	var recs []state.Domain
	if err != nil || json.Unmarshal(js, &recs) != nil || len(recs) != 1 || len(recs[0].Interfaces) != 1 ||
		recs[0].Interfaces[0].Backend != "userspace" || recs[0].Interfaces[0].Profile != "throughput" || !slices.Contains(recs[0].Interfaces[0].Offer, "GUEST_TSO4") {
		t.Errorf("netctl hook status --json: %v\n%s", err, js)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest up %v after virsh create", time.Since(start).Round(time.Millisecond))
	guest.HostAddr(t, "nctllv0", "10.78.1.1/24")
	guest.HostPing(t, "10.78.1.2", 3)

	if out, err := d.Virsh("destroy", "nctl"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/class/net/nctllv0"); !os.IsNotExist(err) {
		t.Errorf("nctllv0 after destroy: %v (want gone: netctl's release deletes it)", err)
	}

	// vhost-net asked for, on a host without /dev/vhost-net: refused.
	out2, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(`<driver name='vhost' queues='2'/>`)))
	if err == nil {
		t.Fatalf("virsh create with <driver name='vhost'> on a host without vhost-net succeeded:\n%s", out2)
	}
	t.Logf("virsh create, vhost-net without /dev/vhost-net: %s", strings.TrimSpace(out2))
	if !strings.Contains(out2, "50-netctl nctl prepare begin") || !strings.Contains(out2, "vhost-net") {
		t.Errorf("virsh's error lacks netctl's line about vhost-net:\n%s", out2)
	}

	// A forced-on bit whose prerequisite the domain forces off: refused
	// before anything is made.
	out4, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(`<driver name='qemu'><guest csum='off' tso4='on'/></driver>`)))
	if err == nil {
		t.Fatalf("virsh create with <guest tso4='on'/> and <guest csum='off'/> succeeded:\n%s", out4)
	}
	t.Logf("virsh create, tso4='on' with csum='off': %s", strings.TrimSpace(out4))
	if !strings.Contains(out4, "50-netctl nctl prepare begin") || !strings.Contains(out4, "<guest tso4='on'/> needs <guest csum='on'/>") {
		t.Errorf("virsh's error lacks netctl's line about tso4 and csum:\n%s", out4)
	}
	// Backend vhost-net from the metadata, on a host without it: policy's
	// reason.
	out5, err := d.Create(g, g.DomainXML(netctlMetadataWith(`backend="vhost-net"`), netctlIface(`<driver queues='2'/>`)))
	if err == nil {
		t.Fatalf("virsh create with backend vhost-net on a host without vhost-net succeeded:\n%s", out5)
	}
	t.Logf("virsh create, backend vhost-net: %s", strings.TrimSpace(out5))
	if !strings.Contains(out5, "50-netctl nctl prepare begin") || !strings.Contains(out5, "policy: backend vhost-net is not available here") || !strings.Contains(out5, "modprobe vhost_net") {
		t.Errorf("virsh's error lacks policy's reason:\n%s", out5)
	}

	// A link by the tap's name that netctl did not make: refused, and the
	// release libvirt runs after the refusal leaves that link alone.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nctllv0"}, PeerName: "nctllv0p"}); err != nil {
		t.Fatal(err)
	}
	theirs, err := netlink.LinkByName("nctllv0")
	if err != nil {
		t.Fatal(err)
	}
	out3, err := d.Create(g, g.DomainXML(netctlMetadata, netctlIface(`<driver name='qemu' queues='2'/>`)))
	if err == nil {
		t.Fatalf("virsh create over a link netctl did not make succeeded:\n%s", out3)
	}
	t.Logf("virsh create, nctllv0 already a veth: %s", strings.TrimSpace(out3))
	if !strings.Contains(out3, "50-netctl nctl prepare begin") || !strings.Contains(out3, "nctllv0") {
		t.Errorf("virsh's error lacks netctl's line about nctllv0:\n%s", out3)
	}
	if l, err := netlink.LinkByName("nctllv0"); err != nil || l.Attrs().Index != theirs.Attrs().Index || l.Type() != "veth" {
		t.Errorf("the veth nctllv0 after the refusal and release: %v %v (want it untouched)", l, err)
	}
	if err := netlink.LinkDel(theirs); err != nil {
		t.Fatal(err)
	}

	// Nothing left: no domain, no link but lo, no record.
	if names, err := d.Running(); err != nil || len(names) != 0 {
		t.Errorf("running domains at the end: %v %v", names, err)
	}
	links, _ := os.ReadDir("/sys/class/net")
	var names []string
	for _, l := range links {
		names = append(names, l.Name())
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "lo" {
		t.Errorf("links left in the test's namespace: %v", names)
	}
	st, err = exec.Command(bin, "hook", "status").CombinedOutput()
	if err != nil || strings.Contains(string(st), "nctl") {
		t.Errorf("netctl hook status at the end: %v\n%s", err, st)
	}
	log := readFile("/var/log/netctl/hook.log")
	for _, want := range []string{"nctl prepare: created tap nctllv0", "nctl release: deleted tap nctllv0", "nctl prepare failed, undone"} {
		if !strings.Contains(log, want) {
			t.Errorf("netctl's log (/var/log/netctl/hook.log) lacks %q", want)
		}
	}
	t.Logf("netctl's log:\n%s", log)
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
