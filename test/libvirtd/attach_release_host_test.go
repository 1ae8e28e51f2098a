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

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/libvirtd"
)

// lvEnv is a private libvirtd with netctl's hook installed (its records
// in /run/netctl, the test's own /run), and the netctl binary that
// attach and detach run, on the same records.
type lvEnv struct {
	d   *libvirtd.Daemon
	bin string
	ctx context.Context
}

func newLvEnv(t *testing.T, ctx context.Context) *lvEnv {
	t.Helper()
	testenv.Host(t)
	bin := buildNetctl(t, t.TempDir())
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
	return &lvEnv{d: d, bin: bin, ctx: ctx}
}

func (e *lvEnv) netctl(args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+state.DefaultDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// records are netctl attach's record files.
func lvRecords() []string {
	m, _ := filepath.Glob(filepath.Join(state.DefaultDir, "nics", "*.json"))
	return m
}

// lvTaps are the taps netctl made (nctlN, nctlpXXXXXXXX).
func lvTaps() []string {
	m, _ := filepath.Glob("/sys/class/net/nctl*")
	return m
}

// boot starts guest name (transient, or defined and started when
// persistent) running hotplugScript and waits until it is up.
func (e *lvEnv) boot(t *testing.T, name string, persistent bool) *libvirtd.Guest {
	t.Helper()
	g, err := e.d.NewGuest(e.ctx, name, hotplugScript)
	if err != nil {
		t.Fatal(err)
	}
	if persistent {
		f := filepath.Join(g.Dir, "domain.xml")
		if err := os.WriteFile(f, []byte(g.DomainXML("")), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := e.d.Virsh("define", f); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if out, err := e.d.Virsh("start", name); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	} else if out, err := e.d.Create(g, g.DomainXML("")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := g.WaitConsole(e.ctx, "GUEST-READY"); err != nil {
		t.Fatal(err)
	}
	return g
}

func (e *lvEnv) attach(t *testing.T, args ...string) *state.NIC {
	t.Helper()
	out, err := e.netctl(append([]string{"attach", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("netctl attach %v: %v\n%s", args, err, out)
	}
	var nic state.NIC
	if err := json.Unmarshal([]byte(out), &nic); err != nil || nic.Tap == nil || nic.Libvirt == nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	return &nic
}

// nothingLeft fails the test if a netctl tap or record is left, or (for a
// running domain) libvirt still has a netctl interface.
func (e *lvEnv) nothingLeft(t *testing.T, when, domain string) {
	t.Helper()
	if got := lvTaps(); len(got) != 0 {
		t.Errorf("%s: taps left: %v\nnetctl's log:\n%s", when, got, readFile("/var/log/netctl/hook.log"))
	}
	if got := lvRecords(); len(got) != 0 {
		t.Errorf("%s: records left: %v", when, got)
	}
	if domain != "" {
		if out, err := e.d.Virsh("domiflist", domain); err != nil || strings.Contains(out, "nctl") {
			t.Errorf("%s: virsh domiflist %s: %v\n%s", when, domain, err, out)
		}
	}
}

// TestHostLibvirtdAttachRelease: with netctl's hook installed, virsh
// destroy of a domain netctl attach gave a NIC leaves no tap and no
// record, with no netctl detach: the hook's release finds the attach's
// records by the domain's UUID. A NIC attached with --persistent is in
// the definition with a tap name of its own (nctlpXXXXXXXX); destroy
// deletes its tap and record too, and at the next virsh start the hook
// makes the tap again (by the interface's alias ua-netctl-ID), so the
// domain starts with the NIC and the guest answers pings across it;
// netctl detach then removes it from the domain and its definition and
// deletes the tap.
func TestHostLibvirtdAttachRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newLvEnv(t, ctx)

	e.boot(t, "lvrel", false)
	nic := e.attach(t, "--vm", "lvrel", "--id", "net1", "--queues", "2")
	if _, err := os.Stat("/sys/class/net/" + nic.Tap.Name); err != nil || len(lvRecords()) != 1 {
		t.Fatalf("after attach: tap %v, records %v", err, lvRecords())
	}
	if out, err := e.d.Virsh("destroy", "lvrel"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	e.nothingLeft(t, "after virsh destroy", "")
	log := readFile("/var/log/netctl/hook.log")
	if !strings.Contains(log, "lvrel release: deleted tap "+nic.Tap.Name+" of NIC net1 (netctl attach)") {
		t.Errorf("netctl's log lacks the release of %s:\n%s", nic.Tap.Name, log)
	}

	// --persistent: in the definition, made again at the next start.
	g := e.boot(t, "lvper", true)
	pn := e.attach(t, "--vm", "lvper", "--id", "net1", "--mac", "52:54:00:79:00:02", "--persistent")
	tap := pn.Tap.Name
	if !strings.HasPrefix(tap, "nctlp") || !pn.Libvirt.Persistent {
		t.Errorf("--persistent NIC: tap %s, libvirt %+v (want nctlpXXXXXXXX, persistent)", tap, pn.Libvirt)
	}
	if out, err := e.d.Virsh("domiflist", "lvper", "--inactive"); err != nil || !strings.Contains(out, tap) {
		t.Errorf("virsh domiflist --inactive: %v\n%s (want %s in the definition)", err, out, tap)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Virsh("destroy", "lvper"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	e.nothingLeft(t, "after virsh destroy of the persistent domain", "")
	if err := os.WriteFile(filepath.Join(g.Share, "cmd"), []byte(strings.ReplaceAll(hotplugScript, "GUEST-NET-UP", "BOOT2-NET-UP")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.d.Virsh("start", "lvper"); err != nil {
		t.Fatalf("virsh start with netctl attach's persistent interface: %v\n%s\nnetctl's log:\n%s", err, out, readFile("/var/log/netctl/hook.log"))
	}
	if b, _ := os.ReadFile("/sys/class/net/" + tap + "/ifalias"); strings.TrimSpace(string(b)) != "netctl hook tap" {
		t.Errorf("%s after the restart: alias %q (want the hook's tap, with netctl's mark)", tap, b)
	}
	if out, err := e.d.Virsh("domiflist", "lvper"); err != nil || !strings.Contains(out, tap) {
		t.Errorf("virsh domiflist after the restart: %v\n%s", err, out)
	}
	if _, err := g.WaitConsole(ctx, "BOOT2-NET-UP"); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, tap, "10.79.0.1/24")
	guest.HostPing(t, "10.79.0.2", 3)
	// netctl detach after the restart: no attach record now (the hook
	// made the tap), found by its alias; out of the domain and its
	// definition, the tap deleted.
	if out, err := e.netctl("detach", "--vm", "lvper", "--id", "net1"); err != nil {
		t.Errorf("netctl detach of the --persistent NIC after the restart: %v\n%s", err, out)
	}
	e.nothingLeft(t, "after detach of the --persistent NIC", "lvper")
	if out, err := e.d.Virsh("domiflist", "lvper", "--inactive"); err != nil || strings.Contains(out, tap) {
		t.Errorf("virsh domiflist --inactive after detach: %v\n%s", err, out)
	}
	if out, err := e.d.Virsh("destroy", "lvper"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	e.nothingLeft(t, "after the second destroy", "")
	t.Logf("netctl's log:\n%s", readFile("/var/log/netctl/hook.log"))
}
