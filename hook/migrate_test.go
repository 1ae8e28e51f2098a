package hook

// The calls below are the ones libvirt makes around an incoming
// migration, with its argv and stdin (libvirt 9.0, Debian 12):
//
//   - migrate begin, on the destination: qemuMigrationDstPrepareAny
//     (src/qemu/qemu_migration.c) formats the domain with
//     VIR_DOMAIN_XML_SECURE|VIR_DOMAIN_XML_MIGRATABLE and calls
//     virHookCall(VIR_HOOK_DRIVER_QEMU, def->name, VIR_HOOK_QEMU_OP_MIGRATE,
//     VIR_HOOK_SUBOP_BEGIN, NULL, xml, &xmlout): virHookCall
//     (src/util/virhook.c) runs `qemu.d/50-netctl NAME migrate begin -`
//     (extra NULL becomes "-") with the XML on stdin and takes stdout as
//     the new XML unless it is empty (virStringIsEmpty); a failure
//     cancels the migration before the domain object or QEMU exist here.
//   - prepare begin: qemuProcessInit (src/qemu/qemu_process.c, called by
//     qemuMigrationDstPrepareAny with migration=true) calls
//     qemuProcessStartHook(VIR_HOOK_QEMU_OP_PREPARE, VIR_HOOK_SUBOP_BEGIN):
//     `NAME prepare begin -`, the domain XML on stdin, no output read.
//   - started begin once the incoming QEMU runs.
//   - release end: qemuProcessStop calls virHookCall(...,
//     VIR_HOOK_QEMU_OP_RELEASE, VIR_HOOK_SUBOP_END, NULL, xml, NULL):
//     `NAME release end -` (libvirt 10.5+ passes the shut-off reason
//     instead of "-": "migrated" on the source after a migration, "failed"
//     on a destination whose incoming migration failed).
//
// A real libvirtd cannot run these here: libvirt refuses to migrate a
// domain to the libvirtd it runs on (the migration cookie's host UUID is
// checked), and the VM harness has one libvirtd (test/libvirtd,
// hook/libvirtd_vm_test.go), so the calls are made as libvirt makes them.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
)

// probeOf is one of policy's recorded probes, with a QEMU version (the
// probes were taken where no QEMU was installed).
func probeOf(t *testing.T, name, qemu string) *host.Description {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "policy", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := host.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	d.QEMU = host.QEMU{Version: qemu}
	return d
}

// writePlan writes netctl plan -j's output for hosts (QEMU 8.2.2) and
// returns its path and the plan.
func writePlan(t *testing.T, hosts ...*host.Description) (string, policy.PlanResult) {
	t.Helper()
	res, err := policy.Plan(hosts, policy.Request{QEMU: "8.2.2"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, res
}

// migrateHook is a hook on a destination described by desc, with a host
// config file naming plan (none when "").
func migrateHook(t *testing.T, desc *host.Description, plan string) (*Hook, *fakeDevices, *bytes.Buffer) {
	t.Helper()
	f := newFake(t)
	f.desc = desc
	h, log, vd := newTestHook(t, f)
	js := `{"log": "-", "vdpa_dir": "` + vd + `"`
	if plan != "" {
		js += `, "plan": "` + plan + `"`
	}
	cp := filepath.Join(t.TempDir(), "hook.json")
	if err := os.WriteFile(cp, []byte(js+"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cp)
	if err != nil {
		t.Fatal(err)
	}
	h.Config = cfg
	return h, f, log
}

// pinXML puts the plan's pin into the domain: its <qemu:override> on the
// managed interface's alias (net1), and its <driver> attributes (none
// for a 6.1 + 6.12 pool: every host carries the old offloads).
func pinXML(t *testing.T, xml []byte, res policy.PlanResult) []byte {
	t.Helper()
	if res.Libvirt.Driver != "<driver/>" {
		t.Fatalf("the plan pins <driver> attributes %s; this test puts only its <qemu:override> in", res.Libvirt.Driver)
	}
	ov := strings.ReplaceAll(res.Libvirt.OverrideXML, "ALIAS", "net1")
	return bytes.Replace(xml, []byte("</domain>"), []byte(ov+"\n</domain>"), 1)
}

// migrateBegin runs `NAME migrate begin -` with xml on stdin.
func migrateBegin(h *Hook, name string, xml []byte) (*Result, error) {
	return h.Run(context.Background(), name, "migrate", "begin", bytes.NewReader(xml))
}

func oneLineErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("migrate begin passed; want a refusal")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the refusal is not one line: %q", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not say %q: %v", w, err)
		}
	}
}

// noneMade checks that the hook made nothing: only the probe ran, and no
// record exists.
func noneMade(t *testing.T, h *Hook, f *fakeDevices) {
	t.Helper()
	for _, c := range f.calls {
		if c != "probe" {
			t.Errorf("migrate begin called %q; it must create nothing (calls %v)", c, f.calls)
		}
	}
	if ds, _, _ := h.Store.ListDomains(); len(ds) != 0 {
		t.Errorf("migrate begin left a record: %+v", ds[0])
	}
}

// TestMigrateBeginPassesUnmanaged: a domain netctl manages nothing in
// passes migrate begin untouched (no probe, no note: the CLI prints
// nothing), with the host config broken or not; one that names netctl is
// refused when the config (here: its plan) does not load.
func TestMigrateBeginPassesUnmanaged(t *testing.T) {
	xml := sample(t, "migrate-vhost.xml")
	start, end := bytes.Index(xml, []byte("<metadata>")), bytes.Index(xml, []byte("</metadata>"))+len("</metadata>")
	plain := append(append([]byte{}, xml[:start]...), xml[end:]...)
	f := newFake(t)
	_, cfgErr := LoadConfig(writeConfig(t, `{"plan": "/nonexistent/pool.json"}`))
	if cfgErr == nil {
		t.Fatal("a config naming a missing plan loaded")
	}
	h := &Hook{ConfigErr: cfgErr, StoreErr: errors.New("no run dir"), Devices: f}
	for _, tc := range []struct {
		name string
		h    *Hook
	}{{"broken config", h}, {"good config", func() *Hook { h, _, _ := newTestHook(t, f); return h }()}} {
		res, err := migrateBegin(tc.h, "mig1", plain)
		if err != nil || len(res.Done) != 0 || len(res.Notes) != 0 {
			t.Errorf("%s: migrate begin of a domain netctl does not manage: %+v, %v; want a silent pass", tc.name, res, err)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v; want none", f.calls)
	}
	_, err := migrateBegin(h, "mig1", xml)
	oneLineErr(t, err, "mig1", "host config does not load", "plan /nonexistent/pool.json does not exist")
}

func writeConfig(t *testing.T, js string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.json")
	if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMigrateBeginRefusesNoVhostNet: a <driver name='vhost'> interface
// cannot come to a host without vhost-net: refused before anything
// moves, with libvirt's reason for it and what to do.
func TestMigrateBeginRefusesNoVhostNet(t *testing.T) {
	d := probeOf(t, "probe-6.1.json", "8.2.2")
	d.VhostNet = host.VhostNet{Error: "vhost-net: not available: no /dev/vhost-net: modprobe vhost_net (CONFIG_VHOST_NET)"}
	h, f, _ := migrateHook(t, d, "")
	_, err := migrateBegin(h, "mig1", sample(t, "migrate-vhost.xml"))
	oneLineErr(t, err, "interface 52:54:00:bb:00:01", "vhost-net", "modprobe vhost_net", "runs on at the source")
	if !errors.Is(err, errs.ErrNotAvailable) {
		t.Errorf("%v does not wrap ErrNotAvailable", err)
	}
	noneMade(t, h, f)
}

// TestMigrateBeginRefusesUnpinnedBits: the domain ran on a 6.12 host
// with QEMU 8.2 (machine pc-q35-8.2), whose vhost-net offers RING_RESET
// and whose tun takes USO: the guest may have negotiated them. This host
// is like the 6.1 probe: its vhost-net has no RING_RESET, its tun no USO.
// With the pool's plan (6.1 and 6.12 hosts) in the host config, unless the
// domain turns them off, QEMU here would refuse the stream after the
// memory was copied: migrate begin refuses now, naming each bit, why, and
// the pin. Without a plan netctl cannot know the source: it passes by,
// with a note and a log line that say to name the plan.
func TestMigrateBeginRefusesUnpinnedBits(t *testing.T) {
	plan, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	h0, f0, log0 := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), "")
	r, err := migrateBegin(h0, "mig1", sample(t, "migrate-vhost.xml"))
	if err != nil || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "passed, unchecked") || !strings.Contains(r.Notes[0], "plan = POOL.json") ||
		!strings.Contains(log0.String(), "passed, unchecked") {
		t.Errorf("without a plan: %+v %v, log:\n%s; want a pass with a note", r, err, log0)
	}
	noneMade(t, h0, f0)
	for _, pl := range []string{plan} {
		h, f, log := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), pl)
		_, err := migrateBegin(h, "mig1", sample(t, "migrate-vhost.xml"))
		oneLineErr(t, err, "domain mig1 cannot migrate to this host", "interface 52:54:00:bb:00:01 (tap mig1tap0, backend vhost-net)",
			"RING_RESET (this kernel's vhost-net does not offer it)", "HOST_USO (tun on 6.1.0-57-amd64 takes no USO frames", "GUEST_USO4", "GUEST_USO6",
			"<qemu:device alias='net1'>", "<qemu:property name='queue_reset' type='bool' value='false'/>", "<qemu:property name='host_uso' type='bool' value='false'/>",
			"netctl plan", "runs on at the source", "netctl hook pin mig1 on the source")
		if !errors.Is(err, errs.ErrNotSupported) {
			t.Errorf("%v does not wrap ErrNotSupported", err)
		}
		if strings.Contains(err.Error(), "GUEST_TSO4") || strings.Contains(err.Error(), "net0") {
			t.Errorf("the refusal names a bit this host carries, or the interface netctl does not manage: %v", err)
		}
		if !strings.Contains(log.String(), "migrate: refused") {
			t.Errorf("log:\n%s", log)
		}
		noneMade(t, h, f)
	}
}

// TestMigrateBeginPassesPinned: the same domain with netctl plan's pin
// (the <qemu:override> for queue_reset and the USO bits on its alias)
// negotiated none of them at the source: it passes, with or without the
// plan in the host config, and creates nothing.
func TestMigrateBeginPassesPinned(t *testing.T) {
	plan, res := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	xml := pinXML(t, sample(t, "migrate-vhost.xml"), res)
	for _, pl := range []string{"", plan} {
		h, f, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), pl)
		r, err := migrateBegin(h, "mig1", xml)
		if err != nil {
			t.Fatalf("plan %q: migrate begin of the pinned domain: %v", pl, err)
		}
		if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "interface 52:54:00:bb:00:01: can come here: backend vhost-net") {
			t.Errorf("notes %q", r.Notes)
		}
		noneMade(t, h, f)
	}
	// A pin on another alias, or one that is not a bool false, pins nothing.
	h, _, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), plan)
	for _, bad := range []string{"alias='net0'", "type='string'"} {
		x := bytes.ReplaceAll(xml, []byte("alias='net1'>"), []byte(bad+">"))
		if bad == "type='string'" {
			x = bytes.ReplaceAll(xml, []byte("type='bool'"), []byte(bad))
		}
		_, err := migrateBegin(h, "mig1", x)
		oneLineErr(t, err, "RING_RESET")
	}
}

// TestMigrateBeginWhatCannotHaveBeenNegotiated: a bit the domain's
// machine type turns off (pc-q35-7.2: no USO, QEMU's hw_compat_8_1), or
// one no host of the configured plan offers (a pool of 6.1 hosts: no
// RING_RESET, no USO), cannot have been negotiated at the source: it does
// not refuse the migration.
func TestMigrateBeginWhatCannotHaveBeenNegotiated(t *testing.T) {
	xml := bytes.Replace(sample(t, "migrate-vhost.xml"), []byte("pc-q35-8.2"), []byte("pc-q35-7.2"), 1)
	pool, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	h, _, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), pool)
	_, err := migrateBegin(h, "mig1", xml)
	oneLineErr(t, err, "RING_RESET")
	if strings.Contains(err.Error(), "USO") {
		t.Errorf("a pc-q35-7.2 guest negotiated no USO, but the refusal names it: %v", err)
	}
	other := probeOf(t, "probe-6.1.json", "")
	other.Hostname = "other-6-1"
	plan, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), other)
	h, f, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), plan)
	if _, err := migrateBegin(h, "mig1", sample(t, "migrate-vhost.xml")); err != nil {
		t.Errorf("migrate begin within a pool of 6.1 hosts: %v; want a pass (no host of the plan offers RING_RESET or USO)", err)
	}
	noneMade(t, h, f)
}

// TestMigrateBeginForcedOnAndVDPA: a bit the domain's <driver> forces on
// that this host cannot carry is refused as prepare refuses it; a vdpa
// interface needs its management device here.
func TestMigrateBeginForcedOnAndVDPA(t *testing.T) {
	h, f, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), "")
	xml := bytes.Replace(pinXML(t, sample(t, "migrate-vhost.xml"), func() policy.PlanResult {
		_, r := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
		return r
	}()), []byte("<driver name='vhost' queues='2'/>"), []byte("<driver name='vhost' queues='2'><guest tso4='on'/></driver>"), 1)
	f.desc.Tap.Offloads = []string{"csum"} // a tun that takes no TSO
	_, err := migrateBegin(h, "mig1", xml)
	oneLineErr(t, err, "<guest tso4='on'/> (GUEST_TSO4) cannot be honoured")
	noneMade(t, h, f)

	h, f, _ = migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), "")
	vx := allXML(t, h.Config.VDPADir)
	_, err = migrateBegin(h, "netctl-all", vx)
	oneLineErr(t, err, "interface 52:54:00:aa:00:02 (vdpa vm1vdpa0): this host has no vdpa")
	f.desc.VDPA = host.VDPA{Available: true, MgmtDevs: []string{"pci/0000:65:00.2"}}
	_, err = migrateBegin(h, "netctl-all", vx)
	oneLineErr(t, err, "no vdpa management device vduse (it has: pci/0000:65:00.2")
	noneMade(t, h, f)
}

// TestMigrateIncomingPrepareRelease: the destination of an incoming
// migration: migrate begin passes, prepare creates the host side exactly
// as a start does (the tap with the domain's 2 queues, vnet_hdr and MTU
// 9000, decided with the pool's plan), started records it, and the
// release at the domain's next stop deletes it.
func TestMigrateIncomingPrepareRelease(t *testing.T) {
	plan, res := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	xml := pinXML(t, sample(t, "migrate-vhost.xml"), res)
	h, f, _ := migrateHook(t, probeOf(t, "probe-6.12.json", "8.2.2"), plan)
	ctx := context.Background()
	if _, err := migrateBegin(h, "mig1", xml); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(ctx, "mig1", "prepare", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	spec, ok := f.tapSpecs["mig1tap0"]
	if !ok || spec.Queues != 2 || spec.MTU != 9000 || spec.Owner != NoOwner {
		t.Errorf("prepare on the destination asked for tap %+v; want mig1tap0 with 2 queues, MTU 9000, no owner", spec)
	}
	rec, err := h.Store.LoadDomain("mig1")
	if err != nil || len(rec.Taps) != 1 || len(rec.Interfaces) != 1 || rec.Interfaces[0].Backend != policy.BackendVhostNet {
		t.Fatalf("record %+v, %v", rec, err)
	}
	// The pool's plan is in the decision: this 6.12 host's vhost-net has
	// RING_RESET, the plan does not.
	if why := rec.Interfaces[0].Dropped["RING_RESET"]; !strings.Contains(why, "pool's plan "+res.ID) {
		t.Errorf("RING_RESET dropped because %q; want the pool's plan", why)
	}
	if _, err := h.Run(ctx, "mig1", "started", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.Store.LoadDomain("mig1"); rec.Status != state.DomainStarted {
		t.Errorf("after started: %s", rec.Status)
	}
	if _, err := h.Run(ctx, "mig1", "release", "end", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("after release: %s", got)
	}
	if _, err := h.Store.LoadDomain("mig1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after release: %v", err)
	}
}

// TestMigrateFailedReleaseOnDestination: an incoming migration that
// fails after prepare (QEMU here refused the stream, or the source
// cancelled): libvirt stops the destination's QEMU and runs release
// there; the source runs on (another host: nothing of it is here). The
// release deletes what this domain's record says and nothing of another
// domain's, whose tap and record stay.
func TestMigrateFailedReleaseOnDestination(t *testing.T) {
	plan, res := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	xml := pinXML(t, sample(t, "migrate-vhost.xml"), res)
	h, f, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), plan)
	ctx := context.Background()
	other := strings.NewReplacer("<name>mig1</name>", "<name>mig2</name>", "mig1tap0", "mig2tap0", "52:54:00:bb:00:01", "52:54:00:bb:00:02",
		"5b3a8f0e-2c1d-4e6f-9a7b-1c2d3e4f5a6b", "5b3a8f0e-2c1d-4e6f-9a7b-1c2d3e4f5a6c")
	xml2 := []byte(other.Replace(string(xml)))
	for _, x := range []struct {
		name string
		xml  []byte
	}{{"mig2", xml2}, {"mig1", xml}} {
		if _, err := migrateBegin(h, x.name, x.xml); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Run(ctx, x.name, "prepare", "begin", bytes.NewReader(x.xml)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Run(ctx, "mig2", "started", "begin", bytes.NewReader(xml2)); err != nil {
		t.Fatal(err)
	}
	// mig1's migration fails: no started, a release.
	if _, err := h.Run(ctx, "mig1", "release", "end", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 mig2tap0#11" {
		t.Errorf("after mig1's release: %s; want mig2's tap left", got)
	}
	if rec, err := h.Store.LoadDomain("mig2"); err != nil || rec.Status != state.DomainStarted || len(rec.Taps) != 1 {
		t.Errorf("mig2's record after mig1's release: %+v, %v", rec, err)
	}
	if _, err := h.Store.LoadDomain("mig1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("mig1's record after its release: %v", err)
	}
	// A second release (libvirt's Finish after the failed Prepare) does nothing.
	if _, err := h.Run(ctx, "mig1", "release", "end", nil); err != nil || f.snapshot() != "eth0#2 mig2tap0#11" {
		t.Errorf("second release: %v; %s", err, f.snapshot())
	}
}

// TestPrepareLogsWhatOfThePoolThisHostLacks: prepare on a host that
// cannot carry all of the pool's plan (a tun without TSO here, where the
// plan offers it) says so in the log: a guest that negotiated it on
// another host of the pool cannot migrate here.
func TestPrepareLogsWhatOfThePoolThisHostLacks(t *testing.T) {
	plan, res := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	d := probeOf(t, "probe-6.1.json", "8.2.2")
	d.Tap.Offloads = []string{"csum"}
	h, _, log := migrateHook(t, d, plan)
	h.Log = log
	xml := pinXML(t, sample(t, "migrate-vhost.xml"), res)
	if _, err := h.Run(context.Background(), "mig1", "prepare", "begin", bytes.NewReader(xml)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "interface 52:54:00:bb:00:01: this host cannot carry all of the pool's plan "+res.ID+": GUEST_TSO4") {
		t.Errorf("log:\n%s", log)
	}
}

// TestNetAliases: an interface without <alias> (a definition) gets the
// alias libvirt gives it at start: net and one more than the highest netN
// of any interface, in order; hostdev interfaces take none of them.
func TestNetAliases(t *testing.T) {
	x := []byte(`<domain type='kvm'><name>a</name><devices>
<interface type='hostdev'><mac address='52:54:00:00:00:01'/></interface>
<interface type='ethernet'><mac address='52:54:00:00:00:02'/></interface>
<interface type='ethernet'><mac address='52:54:00:00:00:03'/><alias name='ua-netctl-x'/></interface>
<interface type='network'><mac address='52:54:00:00:00:04'/><alias name='net4'/></interface>
<interface type='ethernet'><mac address='52:54:00:00:00:05'/></interface>
</devices></domain>`)
	var d liteDomain
	if err := xml.Unmarshal(x, &d); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(netAliases(d.Devices.Interfaces), " ")
	if got != " net5 ua-netctl-x net4 net6" {
		t.Errorf("aliases %q", got)
	}
	// The pin on the alias libvirt will give: the plan's <qemu:override>
	// on net0 pins the first NIC of a definition without aliases.
	xml := bytes.Replace(sample(t, "migrate-vhost.xml"), []byte("<alias name='net1'/>"), nil, 1)
	xml = bytes.Replace(xml, []byte("<alias name='net0'/>"), nil, 1)
	p, err := ParsePlan(xml, DefaultConfig())
	if err != nil || len(p.Interfaces) != 1 || p.Interfaces[0].Alias != "net1" {
		t.Fatalf("plan %+v, %v; want the tap as net1", p, err)
	}
}

// TestMigrateBeginRefusalBoundsTheAlias: the alias comes from the XML; the
// refusal quotes it clipped and on one line.
func TestMigrateBeginRefusalBoundsTheAlias(t *testing.T) {
	pool, _ := writePlan(t, probeOf(t, "probe-6.1.json", ""), probeOf(t, "probe-6.12.json", ""))
	h, _, _ := migrateHook(t, probeOf(t, "probe-6.1.json", "8.2.2"), pool)
	long := "ua-" + strings.Repeat("a", 300) + "&#10;x"
	xml := bytes.Replace(sample(t, "migrate-vhost.xml"), []byte("<alias name='net1'/>"), []byte("<alias name='"+long+"'/>"), 1)
	_, err := migrateBegin(h, "mig1", xml)
	oneLineErr(t, err, "RING_RESET", "alias='ua-aaaa")
	if len(err.Error()) > 4000 {
		t.Errorf("a refusal of %d bytes", len(err.Error()))
	}
}
