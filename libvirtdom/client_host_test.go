package libvirtdom_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/virtio"
)

const readyScript = `netctl-modprobe virtio_net
echo GUEST-READY
sleep 3600
`

// TestHostLibvirtdomClient drives the test's private libvirtd through
// libvirtdom: Dial (default URI and qemu+unix with ?socket=), Lookup by
// name, by UUID and by a name that reads as a UUID, the live XML, a hotplug of netctl's
// <interface type='ethernet'> on a tap made beforehand (driver qemu: this
// host has no vhost-net) that virsh domiflist shows, libvirt's refusal of
// the same one again (with libvirt's message), an attach and detach with Config on a defined
// domain's persistent XML, its interface stats,
// a QEMU monitor passthrough that libvirt logs as tainting the domain, and
// a detach whose device-removed event Removal.Wait sees; after it the
// live XML has no such interface. A socket nobody listens on gives the
// "is libvirtd running?" error.
func TestHostLibvirtdomClient(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := libvirtd.New(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "none")
	if _, err := libvirtdom.Dial(ctx, "qemu+unix:///system?socket="+sock); err == nil || !strings.Contains(err.Error(), "is libvirtd running? socket "+sock) || !errors.Is(err, libvirtdom.ErrUnreachable) {
		t.Errorf("Dial of a socket nobody listens on: %v", err)
	}
	g, err := d.NewGuest(ctx, "lvdom", readyScript)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML("")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c, err := libvirtdom.Dial(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Socket != "/run/libvirt/libvirt-sock" {
		t.Errorf("default socket %s", c.Socket)
	}
	c2, err := libvirtdom.Dial(ctx, "qemu+unix:///system?socket=/run/libvirt/libvirt-sock")
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()

	dom, err := c.Lookup(ctx, "lvdom")
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Virsh("domuuid", "lvdom")
	if err != nil || strings.TrimSpace(out) != dom.UUID {
		t.Fatalf("Lookup by name: UUID %s, virsh domuuid %q %v", dom.UUID, out, err)
	}
	byUUID, err := c.Lookup(ctx, strings.ToUpper(dom.UUID))
	if err != nil || byUUID.Name != "lvdom" || byUUID.UUID != dom.UUID {
		t.Errorf("Lookup by UUID: %+v %v", byUUID, err)
	}
	// A domain whose name reads as a UUID (not its own): tried as a UUID
	// first, then found by its name.
	const uuidName = "0f0e0d0c-0b0a-0908-0706-050403020100"
	ug, err := d.NewGuest(ctx, uuidName, readyScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ug.Dir, "domain.xml"), []byte(ug.DomainXML("")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("define", filepath.Join(ug.Dir, "domain.xml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	byName, err := c.Lookup(ctx, uuidName)
	if err != nil || byName.Name != uuidName || byName.UUID == uuidName {
		t.Errorf("Lookup of a domain named like a UUID: %+v %v", byName, err)
	}
	if running, err := c.Running(ctx, byName); err != nil || running {
		t.Errorf("Running of a defined domain: %v %v", running, err)
	}
	// Config: the persistent definition only (virsh attach-device --config).
	cfgIface, _, err := libvirtdom.NIC{Tap: "nctlh9", MAC: net.HardwareAddr{0x52, 0x54, 0, 0x78, 2, 9}}.XML(policy.Decision{Backend: policy.BackendUserspace})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Attach(ctx, byName, cfgIface, libvirtdom.Config); err != nil {
		t.Fatalf("Attach --config: %v", err)
	}
	if x, err := c.XML(ctx, byName, true); err != nil || !strings.Contains(string(x), "nctlh9") {
		t.Errorf("the persistent XML after Attach --config lacks nctlh9: %v\n%s", err, x)
	}
	if err := c.Detach(ctx, byName, cfgIface, libvirtdom.Config); err != nil {
		t.Fatalf("Detach --config: %v", err)
	}
	if x, err := c.XML(ctx, byName, true); err != nil || strings.Contains(string(x), "nctlh9") {
		t.Errorf("the persistent XML after Detach --config has nctlh9: %v", err)
	}
	if out, err := d.Virsh("undefine", uuidName); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if _, err := c.Lookup(ctx, "no-such-domain"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Lookup of a missing domain: %v", err)
	}
	live, err := c.XML(ctx, dom, false)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := libvirtdom.ParseDomain(live)
	if err != nil || ld.Name != "lvdom" || ld.UUID != dom.UUID {
		t.Fatalf("live XML: %v %+v", err, ld)
	}
	if running, err := c.Running(ctx, dom); err != nil || !running {
		t.Errorf("Running: %v %v", running, err)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-READY"); err != nil {
		t.Fatal(err)
	}

	// The tap beforehand, as an operator would make it for managed='no'.
	if out, err := exec.Command("ip", "tuntap", "add", "dev", "nctlh0", "mode", "tap", "vnet_hdr").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v\n%s", err, out)
	}
	if out, err := exec.Command("ip", "link", "set", "nctlh0", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set up: %v\n%s", err, out)
	}
	mac, _ := net.ParseMAC("52:54:00:78:02:01")
	dec := policy.Decision{Backend: policy.BackendUserspace, Offer: virtio.NetCsum | virtio.NetGuestCsum | virtio.NetHostTSO4 | virtio.NetMrgRxbuf | virtio.EventIdx}
	ifx, unexpressed, err := libvirtdom.NIC{Tap: "nctlh0", MAC: mac}.XML(dec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attaching:\n%s\nnot in libvirt's XML: %q", ifx, unexpressed)
	start := time.Now()
	if err := c.Attach(ctx, dom, ifx, libvirtdom.Live); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	t.Logf("Attach: %v", time.Since(start).Round(time.Millisecond))
	if out, err := d.Virsh("domiflist", "lvdom"); err != nil || !strings.Contains(out, "nctlh0") || !strings.Contains(out, "52:54:00:78:02:01") {
		t.Errorf("virsh domiflist after Attach: %v\n%s", err, out)
	}
	live, err = c.XML(ctx, dom, false)
	if err != nil {
		t.Fatal(err)
	}
	ld, err = libvirtdom.ParseDomain(live)
	if err != nil {
		t.Fatal(err)
	}
	x := libvirtdom.InterfaceByMAC(ld, mac)
	alias := libvirtdom.Alias(x)
	if x == nil || alias == "" {
		t.Fatalf("the live XML has no interface %s with an alias:\n%s", mac, live)
	}
	runs := libvirtdom.RunsOf(x)
	t.Logf("runs: %s", runs)
	if runs.Driver != "qemu" || runs.Target != "nctlh0" || !strings.Contains(runs.String(), "<host tso4='on'/>") || !strings.Contains(runs.String(), "<guest tso4='off'/>") {
		t.Errorf("RunsOf: %+v", runs)
	}
	// libvirt refuses the same interface again (its tap is in use: "Unable
	// to create tap device nctlh0: Device or resource busy"); its message
	// comes back, and nothing is added.
	if err := c.Attach(ctx, dom, ifx, libvirtdom.Live); err == nil {
		t.Error("a second Attach of the same interface succeeded")
	} else {
		t.Logf("a second Attach: %v", err)
		if out, _ := d.Virsh("domiflist", "lvdom"); strings.Count(out, "52:54:00:78:02:01") != 1 {
			t.Errorf("virsh domiflist after the refused Attach:\n%s", out)
		}
	}
	if _, err := c.InterfaceStats(ctx, dom, "nctlh0"); err != nil {
		t.Errorf("InterfaceStats: %v", err)
	}
	res, err := c.MonitorCommand(ctx, dom, `{"execute":"query-status"}`)
	if err != nil || !res.Tainted || !strings.Contains(string(res.Reply), `"running"`) {
		t.Errorf("MonitorCommand: %v %+v %s", err, res, res.Reply)
	}
	if b, _ := os.ReadFile("/var/log/libvirt/qemu/lvdom.log"); !strings.Contains(string(b), "custom-monitor") {
		t.Errorf("libvirt's log of the domain does not say it is tainted by custom-monitor:\n%s", b)
	}

	// A Wait that cannot succeed ends with ErrPending at its deadline.
	r, err := c.WatchRemoved(ctx, dom)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := r.Wait(short, "net-none"); !errors.Is(err, libvirtdom.ErrPending) {
		t.Errorf("Wait for an alias never removed: %v", err)
	}
	cancelShort()
	start = time.Now()
	if err := c.Detach(ctx, dom, ifx, libvirtdom.Live); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	wctx, cancelWait := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	if err := r.Wait(wctx, alias); err != nil {
		t.Fatalf("Wait for %s: %v", alias, err)
	}
	t.Logf("Detach and device-removed %s: %v", alias, time.Since(start).Round(time.Millisecond))
	live, err = c.XML(ctx, dom, false)
	if err != nil {
		t.Fatal(err)
	}
	if ld, err = libvirtdom.ParseDomain(live); err != nil || libvirtdom.InterfaceByMAC(ld, mac) != nil {
		t.Errorf("the live XML after the removal still has %s (%v)", mac, err)
	}
	if out, err := d.Virsh("domiflist", "lvdom"); err != nil || strings.Contains(out, "nctlh0") {
		t.Errorf("virsh domiflist after Detach: %v\n%s", err, out)
	}
	r.Close()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := c.Lookup(ctx, "lvdom"); err == nil {
		t.Error("Lookup after Close succeeded")
	}
}
