package libvirtd_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/guest"
)

// fullBusDevices make a q35 domain with no free hotplug slot: pcie.0
// takes no hotplug, and each of its two pcie-root-ports (given, so
// libvirt adds no spare) holds a device, the results share on one and a
// virtio-rng (alias ua-rng0, which the test unplugs to free a slot) on
// the other. USB is off: libvirt would put its controller on a port too.
var fullBusDevices = []string{
	"    <controller type='usb' model='none'/>",
	"    <controller type='pci' index='1' model='pcie-root-port'/>",
	"    <controller type='pci' index='2' model='pcie-root-port'/>",
	"    <rng model='virtio'><backend model='random'>/dev/urandom</backend><alias name='ua-rng0'/></rng>",
}

// lvLocks are the lock files in netctl's run directory.
func lvLocks() []string {
	m, _ := filepath.Glob(filepath.Join(state.DefaultDir, "locks", "*"))
	slices.Sort(m)
	return m
}

// TestHostLibvirtdAttachFullBus: libvirt refuses netctl's hotplug for
// want of a PCI slot (a running q35 domain whose pcie-root-ports are all
// taken): netctl attach fails (exit 1) with libvirt's own reason and
// what to do, and undoes everything it made: no nctl* tap, no record, no
// lock file it took, and virsh domiflist as before. Once a slot is free
// (the rng unplugged), the same attach works: the guest gets the NIC and
// answers pings across it; detach leaves nothing.
func TestHostLibvirtdAttachFullBus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)
	g, err := e.d.NewGuest(ctx, "lvfull", hotplugScript)
	if err != nil {
		t.Fatal(err)
	}
	g.Machine, g.Devices = "q35", fullBusDevices
	if out, err := e.d.Create(g, g.DomainXML("")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-READY"); err != nil {
		t.Fatal(err)
	}
	live, err := e.d.Virsh("dumpxml", "lvfull")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(live, "model='pcie-root-port'"); n != 2 || !strings.Contains(live, "ua-rng0") {
		t.Fatalf("the domain has %d pcie-root-ports (want the 2 given, both taken):\n%s", n, live)
	}
	ifBefore, err := e.d.Virsh("domiflist", "lvfull")
	if err != nil {
		t.Fatal(err)
	}
	locksBefore := lvLocks()

	out, err := e.netctl("attach", "--vm", "lvfull", "--id", "full1", "--mac", "52:54:00:79:00:02")
	t.Logf("netctl attach on a full bus: %v\n%s", err, strings.TrimSpace(out))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("netctl attach on a full bus: %v (want exit 1)", err)
	}
	if !strings.Contains(out, "No more available PCI slots") {
		t.Errorf("netctl attach's message lacks libvirt's reason (No more available PCI slots):\n%s", out)
	}
	if !strings.Contains(out, "pcie-root-port") {
		t.Errorf("netctl attach's message does not say what to do (give the domain a free pcie-root-port):\n%s", out)
	}
	if got := lvTaps(); len(got) != 0 {
		t.Errorf("taps after the refusal: %v", got)
	}
	if got := lvRecords(); len(got) != 0 {
		t.Errorf("records after the refusal: %v", got)
	}
	if got := lvLocks(); !slices.Equal(got, locksBefore) {
		t.Errorf("lock files after the refusal: %v (before: %v)", got, locksBefore)
	}
	if out, err := e.d.Virsh("domiflist", "lvfull"); err != nil || out != ifBefore {
		t.Errorf("virsh domiflist after the refusal: %v\n%s\n(before:\n%s)", err, out, ifBefore)
	}

	// Free a slot: the same attach works.
	if out, err := e.d.Virsh("detach-device-alias", "lvfull", "ua-rng0", "--live"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for {
		x, err := e.d.Virsh("dumpxml", "lvfull")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(x, "ua-rng0") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the rng is still in the domain: %v\n%s", ctx.Err(), x)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nic := e.attach(t, "--vm", "lvfull", "--id", "full1", "--mac", "52:54:00:79:00:02")
	if out, err := e.d.Virsh("domiflist", "lvfull"); err != nil || !strings.Contains(out, nic.Tap.Name) {
		t.Errorf("virsh domiflist after the attach: %v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, nic.Tap.Name, "10.79.0.1/24")
	guest.HostPing(t, "10.79.0.2", 3)
	if out, err := e.netctl("detach", "--vm", "lvfull", "--id", "full1"); err != nil {
		t.Fatalf("netctl detach: %v\n%s", err, out)
	}
	e.nothingLeft(t, "after detach", "lvfull")
	if got := lvLocks(); !slices.Equal(got, locksBefore) {
		t.Errorf("lock files after detach: %v (before: %v)", got, locksBefore)
	}
}
