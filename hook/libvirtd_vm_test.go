package hook

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/test/vduse"
)

// treeNetctl is bin/netctl of this tree (make build), as the chroot in
// l2.Root sees it.
func treeNetctl(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(filepath.Dir(wd), "bin", "netctl") // the package is hook/
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v: run make build first (a static netctl, CGO_ENABLED=0)", p, err)
	}
	return strings.TrimPrefix(p, l2.Root)
}

// chrootCmd runs a host binary in l2.Root with a clean environment (as
// libvirtd's own hooks get), returning its combined output.
func chrootCmd(ctx context.Context, env []string, bin string, args ...string) (string, error) {
	return libvirtd.ChrootRun(ctx, nil, env, bin, args...)
}

// libvirtdVDPAXML is a transient domain with one vdpa interface that
// netctl publishes (paths as the chroot sees them): no disk, no kernel,
// started paused; shared memfd RAM as VDUSE needs.
func libvirtdVDPAXML(name, driver string) string {
	return `<domain type='qemu'>
  <name>hooklv</name>
  <metadata>
    <netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
      <netctl:interface mac="52:54:00:95:db:c1" mgmtdev="vduse"/>
    </netctl:hook>
  </metadata>
  <memory unit='KiB'>131072</memory>
  <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <features><acpi/></features>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='vdpa'>
      <mac address='52:54:00:95:db:c1'/>
      <source dev='/run/netctl/vdpa/` + name + `'/>
      <model type='virtio'/>
      ` + driver + `
    </interface>
  </devices>
</domain>`
}

// TestVMHookLibvirtdVDPA is issue 13's optional end-to-end test: a real
// libvirtd in the 6.12 VM (the host's libvirt, chrooted in l2.Root, with
// writable tmpfs over its state, config and log directories) runs netctl
// hook install's script. virsh create of a domain with a type='vdpa'
// interface on /run/netctl/vdpa/NAME makes netctl create the device from
// the VDUSE management device and publish it; libvirt opens the published
// path and hands it to QEMU; hook status shows the decision; virsh
// destroy releases it (the vdpa device is gone). A domain forcing an
// offload the VDUSE device does not offer is refused with netctl's line
// in virsh's error, and the device netctl created for it is deleted.
func TestVMHookLibvirtdVDPA(t *testing.T) {
	netctl := treeNetctl(t)
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		// Without vDPA the same hook call (the script libvirtd runs, with
		// the domain XML on stdin) refuses with one line and leaves
		// nothing.
		if err := l2.Chroot(); err != nil {
			m.Fatal(err)
		}
		env := []string{"NETCTL_RUN_DIR=/run/l2/hookrun", "NETCTL_HOOK_CONFIG=/run/l2/nohook.json"}
		os.WriteFile(l2.Root+"/run/l2/nohook.json", []byte(`{"log": "-"}`), 0o644)
		out, err := libvirtd.ChrootRun(context.Background(), []byte(libvirtdVDPAXML("netctl-h2", "")), env, netctl, "hook", "qemu", "hooklv", "prepare", "begin", "-")
		m.Logf("hook without vDPA: %v %s", err, out)
		var ee *exec.ExitError
		m.Check(errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Count(strings.TrimSpace(out), "\n") == 0 && strings.Contains(out, "vdpa"),
			"netctl hook qemu prepare without vDPA: %v %q, want exit 1 and one line about vdpa", err, out)
		st, err := state.Open(l2.Root + "/run/l2/hookrun")
		if err == nil {
			ds, _, _ := st.ListDomains()
			m.Check(len(ds) == 0, "a refused prepare left a record: %v", ds)
		}
		_, lerr := os.Lstat(l2.Root + "/run/netctl/vdpa/netctl-h2")
		m.Check(errors.Is(lerr, os.ErrNotExist), "a published link was left: %v", lerr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The host's libvirtd chrooted in the VM, on writable tmpfs copies of
	// its directories (libvirtd.Chrooted). netctl runs with its defaults
	// (there is no /etc/netctl/hook.json to write): log
	// /var/log/netctl/hook.log, vdpa_dir /run/netctl/vdpa, timeout 30 s.
	lvd := libvirtd.NewChrooted(t)
	if err := os.MkdirAll(l2.Root+"/var/log/netctl", 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := chrootCmd(ctx, nil, netctl, "hook", "install", "--dir", "/etc/libvirt/hooks"); err != nil {
		t.Fatalf("netctl hook install: %v\n%s", err, out)
	}
	hookLog := func() string { b, _ := os.ReadFile(l2.Root + "/var/log/netctl/hook.log"); return string(b) }
	if err := lvd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	virsh := func(args ...string) (string, error) { return lvd.Virsh(ctx, args...) }

	dev, err := vduse.Create(vduse.Config{Name: "netctl-h2"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			dev.Close()
		}
	}()
	create := func(driver string) (string, error) {
		if err := os.WriteFile(l2.Root+"/run/hooklv.xml", []byte(libvirtdVDPAXML("netctl-h2", driver)), 0o644); err != nil {
			t.Fatal(err)
		}
		return virsh("create", "--paused", "/run/hooklv.xml")
	}

	// Refused: an offload the VDUSE device does not offer.
	out, err := create("<driver><host csum='on'/></driver>")
	t.Logf("virsh create, <host csum='on'/> on the VDUSE device: %v %s", err, strings.TrimSpace(out))
	if err == nil {
		t.Fatalf("virsh create forcing <host csum='on'/> on a device without CSUM succeeded")
	}
	if !strings.Contains(out, "50-netctl hooklv prepare begin") || !strings.Contains(out, "<host csum='on'/> (CSUM) cannot be honoured: vdpa device netctl-h2 does not offer it") {
		t.Errorf("virsh's error lacks netctl's line:\n%s\nnetctl's log:\n%s", out, hookLog())
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-h2"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-h2 after the refusal: %v (want deleted)", err)
	}

	// Accepted: netctl creates and publishes, libvirt opens, QEMU holds it.
	start := time.Now()
	if out, err := create(""); err != nil {
		t.Fatalf("virsh create: %v\n%s\nnetctl's log:\n%s", err, out, hookLog())
	}
	t.Logf("virsh create --paused: %v", time.Since(start).Round(time.Millisecond))
	link := l2.Root + "/run/netctl/vdpa/netctl-h2"
	target, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(target, "/dev/vhost-vdpa-") {
		t.Fatalf("published %s -> %q, %v", link, target, err)
	}
	pidb, err := os.ReadFile(l2.Root + "/run/libvirt/qemu/hooklv.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidb)))
	fds, err := l2.FDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	if fds[l2.Root+target] < 1 {
		t.Errorf("QEMU (pid %d) holds no fd of %s: %v", pid, l2.Root+target, fds)
	}
	js, err := chrootCmd(ctx, nil, netctl, "hook", "status", "--json")
	var recs []state.Domain
	if err != nil || json.Unmarshal([]byte(js), &recs) != nil || len(recs) != 1 || recs[0].Status != state.DomainStarted ||
		len(recs[0].Interfaces) != 1 || recs[0].Interfaces[0].Backend != "vdpa" || len(recs[0].VDPAs) != 1 {
		t.Errorf("netctl hook status --json: %v\n%s", err, js)
	}
	if out, err := virsh("destroy", "hooklv"); err != nil {
		t.Fatalf("virsh destroy: %v\n%s", err, out)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-h2"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-h2 after destroy: %v (want deleted by the release)", err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("%s after destroy: %v", link, err)
	}
	if out, _ := chrootCmd(ctx, nil, netctl, "hook", "status"); !strings.Contains(out, "prepared nothing") {
		t.Errorf("hook status after destroy:\n%s", out)
	}
	log := hookLog()
	for _, want := range []string{"hooklv prepare: created vdpa netctl-h2 from vduse", "hooklv release: deleted vdpa netctl-h2", "hooklv prepare failed, undone"} {
		if !strings.Contains(log, want) {
			t.Errorf("netctl's log lacks %q", want)
		}
	}
	t.Logf("netctl's log:\n%s", log)
	closed = true
	if err := dev.Close(); err != nil {
		t.Errorf("destroying the VDUSE device: %v", err)
	}
}
