package libvirtd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/libvirtd"
)

// vfIface is an SR-IOV VF written as libvirt documents it, on a PCI
// address this host does not have.
const vfIface = `    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:6d:90:02'/>
      <driver name='vfio'/>
      <source><address type='pci' domain='0x0000' bus='0x7e' slot='0x1f' function='0x7'/></source>
    </interface>`

// TestHostLibvirtdPassesOthers: with netctl's hook installed and its host
// config broken (a typo in manage), a real libvirtd starts, runs and
// stops domains netctl has nothing to do with: one named "-x" (libvirt
// allows it; the script passes -- so it is not taken for a flag), and
// one with a VF interface on a host without that PCI device fails with
// libvirt's own error, never netctl's. A domain that asks for netctl is
// refused with netctl's one line about the config. The records go to the
// run directory hook install wrote into the script (libvirt filters a
// hook's environment).
func TestHostLibvirtdPassesOthers(t *testing.T) {
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
	if err := os.WriteFile("/etc/netctl/hook.json", []byte(`{"manage": "some"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(d.Dir, "netctl-run")
	out, err := exec.Command(bin, "hook", "install", "--dir", d.HookDir, "--run-dir", run).CombinedOutput()
	if err != nil {
		t.Fatalf("netctl hook install: %v\n%s", err, out)
	}
	script, _ := os.ReadFile(filepath.Join(d.HookDir, "qemu.d", "50-netctl"))
	if !strings.Contains(string(script), "--run-dir '"+run+"' -- \"$@\"") {
		t.Fatalf("the installed script does not pass the run dir and --:\n%s", script)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// A domain named -x: starts, runs (its console shows the guest's
	// script), and stops.
	g, err := d.NewGuest(ctx, "-x", "echo GUEST-RUNS\nsleep 3600\n")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.Create(g, g.DomainXML("")); err != nil {
		t.Fatalf("virsh create of domain -x with netctl's hook installed: %v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	if _, err := g.WaitConsole(ctx, "GUEST-RUNS"); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Virsh("destroy", "--", "-x"); err != nil {
		t.Fatalf("virsh destroy -x: %v\n%s", err, out)
	}
	if names, err := d.Running(); err != nil || len(names) != 0 {
		t.Errorf("running after destroy: %v %v", names, err)
	}
	calls := readFile(d.Log)
	for _, op := range []string{"prepare begin", "started begin", "stopped end", "release end"} {
		if !strings.Contains(calls, "50-netctl -x "+op) {
			t.Logf("libvirtd's log has no line for the hook's %q (libvirt logs hook calls only at some levels)", op)
		}
	}

	// A VF on a PCI address this host lacks: libvirt's error, not netctl's.
	vf, err := d.NewGuest(ctx, "vf", "sleep 3600\n")
	if err != nil {
		t.Fatal(err)
	}
	out2, err := d.Create(vf, vf.DomainXML("", vfIface))
	if err == nil {
		t.Fatalf("virsh create of a VF on a PCI address the host lacks succeeded:\n%s", out2)
	}
	t.Logf("virsh create, VF: %s", strings.TrimSpace(out2))
	if strings.Contains(out2, "50-netctl") || strings.Contains(out2, "netctl hook") {
		t.Errorf("the VF domain failed with netctl's line, want libvirt's own:\n%s", out2)
	}
	if !strings.Contains(out2, "0000:7e:1f.7") && !strings.Contains(out2, "PCI") {
		t.Errorf("virsh's error does not name the missing PCI device:\n%s", out2)
	}

	// A domain that asks for netctl: refused with netctl's line.
	n, err := d.NewGuest(ctx, "nctl", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	out3, err := d.Create(n, n.DomainXML(netctlMetadata, netctlIface(`<driver name='qemu'/>`)))
	if err == nil {
		t.Fatalf("virsh create of a netctl domain with a broken netctl config succeeded:\n%s", out3)
	}
	if !strings.Contains(out3, "50-netctl nctl prepare begin") || !strings.Contains(out3, `manage \"some\"`) && !strings.Contains(out3, `manage "some"`) {
		t.Errorf("virsh's error lacks netctl's line about its config:\n%s", out3)
	}
	log := readFile("/var/log/netctl/hook.log")
	t.Logf("netctl's log:\n%s", log)
	if !strings.Contains(log, "-x prepare: passed by") || !strings.Contains(log, "vf prepare: passed by") {
		t.Errorf("netctl's log does not say it passed -x and vf by")
	}
	if ents, err := os.ReadDir(filepath.Join(run, "hook")); err == nil && len(ents) != 0 {
		t.Errorf("records left in %s: %v", run, ents)
	}
	if _, err := os.Stat(run); err != nil {
		t.Errorf("the hook did not use the run dir the script names: %v", err)
	}
}
