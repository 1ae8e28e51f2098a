package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/hook"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/state"
)

// hookEnv is what a hook run needs: its own run dir, config and log.
type hookEnv struct {
	bin, run, cfg, log string
}

func newHookEnv(t *testing.T, bin string) *hookEnv {
	t.Helper()
	d := t.TempDir()
	e := &hookEnv{bin: bin, run: filepath.Join(d, "run"), cfg: filepath.Join(d, "hook.json"), log: filepath.Join(d, "hook.log")}
	cfg := `{"log": "` + e.log + `", "vdpa_dir": "` + filepath.Join(e.run, "vdpa") + `", "timeout": "20s"}`
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// hook runs netctl hook qemu with stdin.
func (e *hookEnv) hook(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(e.bin, append([]string{"hook", "qemu"}, args...)...)
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run, "NETCTL_HOOK_CONFIG="+e.cfg)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("netctl hook qemu %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hook", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHostHookEthernet: prepare creates the tap the domain XML asks for
// (4 queues, vnet_hdr, owner 107 from the DAC seclabel, MTU 9000), leaves
// the interface the metadata does not list alone, opens like libvirt
// does (4 queues with vnet_hdr), started records, release deletes it and
// a second release is fine.
func TestHostHookEthernet(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	xml := readTestdata(t, "ethernet.xml")

	r := e.hook(t, xml, "hookdom", "prepare", "begin", "-")
	if r.code != 0 {
		t.Fatalf("prepare: %+v", r)
	}
	l, err := netlink.LinkByName("nctlhk0")
	if err != nil {
		t.Fatalf("prepare made no tap nctlhk0: %v (stderr %q)", err, r.stderr)
	}
	tt, ok := l.(*netlink.Tuntap)
	if !ok {
		t.Fatalf("nctlhk0 is a %s", l.Type())
	}
	if tt.Mode != netlink.TUNTAP_MODE_TAP || tt.Flags&netlink.TUNTAP_MULTI_QUEUE == 0 || tt.Flags&netlink.TUNTAP_VNET_HDR == 0 {
		t.Errorf("nctlhk0: mode %v flags %v, want a multiqueue tap with vnet_hdr", tt.Mode, tt.Flags)
	}
	if tt.NonPersist {
		t.Error("nctlhk0 is not persistent")
	}
	if tt.Owner != 0 { // IFLA_TUN_OWNER is sent only for an owner
		t.Errorf("nctlhk0 owner %d, want none (root only) without tap_owner in the config", tt.Owner)
	}
	if l.Attrs().MTU != 9000 {
		t.Errorf("nctlhk0 MTU %d, want 9000", l.Attrs().MTU)
	}
	if _, err := netlink.LinkByName("notours0"); err == nil {
		t.Error("prepare created notours0, an interface the metadata does not list")
	}
	// libvirt opens the tap with the domain's queues and vnet_hdr.
	q, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlhk0", VnetHdr: true, Queues: 4})
	if err != nil {
		t.Fatalf("opening nctlhk0 as libvirt would: %v", err)
	}
	q.Close()

	if r := e.hook(t, xml, "hookdom", "started", "begin", "-"); r.code != 0 {
		t.Fatalf("started: %+v", r)
	}
	st := execStatus(t, e, "hookdom")
	if !strings.Contains(st, "hookdom: started") || !strings.Contains(st, "tap nctlhk0") {
		t.Errorf("hook status after started:\n%s", st)
	}

	var recs []state.Domain
	if err := json.Unmarshal([]byte(execStatus(t, e, "--json")), &recs); err != nil || len(recs) != 1 ||
		recs[0].Status != state.DomainStarted || len(recs[0].Taps) != 1 || recs[0].Taps[0].Queues != 4 || recs[0].Taps[0].Owner != -1 {
		t.Errorf("hook status --json: %+v, %v", recs, err)
	}

	// A tap of another domain is not ours to delete.
	other := mkTap(t, "othertap0")
	if r := e.hook(t, nil, "hookdom", "release", "end", "shutdown"); r.code != 0 {
		t.Fatalf("release: %+v", r)
	}
	if _, err := netlink.LinkByName("nctlhk0"); err == nil {
		t.Error("release left nctlhk0")
	}
	if _, err := netlink.LinkByName(other); err != nil {
		t.Errorf("release deleted %s, which netctl did not create: %v", other, err)
	}
	if r := e.hook(t, nil, "hookdom", "release", "end", "-"); r.code != 0 {
		t.Fatalf("second release: %+v", r)
	}
	if st := execStatus(t, e, "hookdom"); !strings.Contains(st, "prepared nothing") {
		t.Errorf("status after release:\n%s", st)
	}
	log, _ := os.ReadFile(e.log)
	if !strings.Contains(string(log), "created tap nctlhk0") || !strings.Contains(string(log), "deleted tap nctlhk0") {
		t.Errorf("log file %s lacks the steps:\n%s", e.log, log)
	}

	// tap_owner "seclabel": the DAC seclabel's user owns the tap.
	cfg, _ := os.ReadFile(e.cfg)
	os.WriteFile(e.cfg, bytes.Replace(cfg, []byte("{"), []byte(`{"tap_owner": "seclabel", `), 1), 0o644)
	if r := e.hook(t, xml, "hookdom", "prepare", "begin", "-"); r.code != 0 {
		t.Fatalf("prepare with tap_owner seclabel: %+v", r)
	}
	if l, err := netlink.LinkByName("nctlhk0"); err != nil || l.(*netlink.Tuntap).Owner != 107 {
		t.Errorf("with tap_owner seclabel: %v %+v, want owner 107 (the DAC seclabel)", err, l)
	}
	if r := e.hook(t, nil, "hookdom", "release", "end", "-"); r.code != 0 {
		t.Fatalf("release: %+v", r)
	}
}

func mkTap(t *testing.T, name string) string {
	t.Helper()
	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	return name
}

func execStatus(t *testing.T, e *hookEnv, args ...string) string {
	t.Helper()
	cmd := exec.Command(e.bin, append([]string{"hook", "status"}, args...)...)
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hook status: %v\n%s", err, out)
	}
	return string(out)
}

// TestHostHookTapInUse: a tap name already in use refuses the start with
// one line, exit 1, and changes nothing: the existing link stays, no
// other tap appears, no record is written. A failure after a first tap
// was made removes that tap again.
func TestHostHookTapInUse(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	mkTap(t, "nctlhk0")
	before := linkNames(t)
	r := e.hook(t, readTestdata(t, "ethernet.xml"), "hookdom", "prepare", "begin", "-")
	if r.code != 1 {
		t.Fatalf("prepare over an existing tap: %+v, want exit 1", r)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "nctlhk0") || !strings.Contains(lines[0], "ip link del") {
		t.Errorf("stderr is not one clear line: %q", r.stderr)
	}
	if after := linkNames(t); after != before {
		t.Errorf("links changed: %v -> %v", before, after)
	}
	if st := execStatus(t, e); !strings.Contains(st, "prepared nothing") {
		t.Errorf("a refused prepare left a record:\n%s", st)
	}

	// Two taps, the second in use: the first is undone.
	xml := strings.Replace(string(readTestdata(t, "ethernet.xml")), "<interface type='ethernet'>\n      <mac address='52:54:00:e5:48:59'/>\n      <target dev='notours0'",
		"<interface type='ethernet'>\n      <mac address='52:54:00:e5:48:59'/>\n      <target dev='nctlhk1'", 1)
	xml = strings.Replace(xml, "<target dev='nctlhk0'", "<target dev='nctlhk2'", 1)
	xml = strings.Replace(xml, `profile="throughput"/>`, `profile="throughput"/><netctl:interface mac="52:54:00:e5:48:59"/>`, 1)
	mkTap(t, "nctlhk1")
	before = linkNames(t)
	r = e.hook(t, []byte(xml), "hookdom", "prepare", "begin", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "nctlhk1") {
		t.Fatalf("prepare with the second tap in use: %+v", r)
	}
	if after := linkNames(t); after != before {
		t.Errorf("a failed prepare left links: %v -> %v", before, after)
	}
}

// TestHostHookInstall writes the script into a temporary hook directory
// and runs it: it execs this netctl with "hook qemu" and the arguments.
func TestHostHookInstall(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	dir := t.TempDir()
	r := execNetctl(t, bin, "hook", "install", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "restart libvirtd") {
		t.Fatalf("install: %+v", r)
	}
	p := filepath.Join(dir, "qemu.d", "50-netctl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "#!/bin/sh" || lines[1] != "exec '"+bin+"' hook qemu -- \"$@\"" {
		t.Errorf("script:\n%s", b)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", st.Mode())
	}
	if r := execNetctl(t, bin, "hook", "install", "--dir", dir); r.code != 0 || !strings.Contains(r.stdout, "already installed") {
		t.Errorf("second install: %+v", r)
	}
	// The script runs netctl: migrate begin of a domain netctl manages
	// nothing in exits 0 and prints nothing, for a domain named like a
	// flag too (with the test's config: the hook reads it now, and logs
	// the pass-by to the config's log, not the machine's).
	e := newHookEnv(t, bin)
	for _, dom := range []string{"-x", "--help"} {
		cmd := exec.Command(p, dom, "migrate", "begin", "-")
		cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run, "NETCTL_HOOK_CONFIG="+e.cfg)
		cmd.Stdin = strings.NewReader("<domain><name>" + dom + "</name></domain>")
		if out, err := cmd.Output(); err != nil || len(out) != 0 {
			t.Errorf("the script for domain %s, migrate: %v, stdout %q (libvirt takes it as the new XML)", dom, err, out)
		}
	}
	cmd := exec.Command(p, "dom", "stopped", "end", "-")
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run, "NETCTL_HOOK_CONFIG="+e.cfg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("running the script: %v\n%s", err, out)
	}
	cmd = exec.Command(p, "dom", "prepare", "begin", "-")
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run, "NETCTL_HOOK_CONFIG="+e.cfg)
	cmd.Stdin = strings.NewReader("<domain><metadata><netctl:hook xmlns:netctl='" + hook.Namespace + "'>")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "domain XML") {
		t.Errorf("the script with bad XML that names netctl: %v\n%s", err, out)
	}
}

// TestHostHookVhostNet: <driver name='vhost'> needs /dev/vhost-net. Where
// the host has none (this machine), prepare refuses with one line that
// says so and creates nothing; where it has one, the tap is created.
func TestHostHookVhostNet(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	xml := strings.Replace(string(readTestdata(t, "ethernet.xml")), "<driver queues='4'/>", "<driver name='vhost' queues='4'/>", 1)
	before := linkNames(t)
	r := e.hook(t, []byte(xml), "hookdom", "prepare", "begin", "-")
	if _, err := os.Stat("/dev/vhost-net"); err != nil {
		if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "/dev/vhost-net") || !strings.Contains(r.stderr, "modprobe vhost_net") {
			t.Errorf("prepare without /dev/vhost-net: %+v, want exit 1 and one line naming /dev/vhost-net", r)
		}
		if after := linkNames(t); after != before {
			t.Errorf("links changed: %v -> %v", before, after)
		}
		return
	}
	if r.code != 0 {
		t.Fatalf("prepare with /dev/vhost-net: %+v", r)
	}
	if _, err := netlink.LinkByName("nctlhk0"); err != nil {
		t.Error(err)
	}
	if r := e.hook(t, nil, "hookdom", "release", "end", "-"); r.code != 0 {
		t.Fatalf("release: %+v", r)
	}
}

// TestHostHookDirect: a direct interface's lower device is checked, not
// changed: what its features lack is said on stderr and kept in the
// record; a missing lower device refuses the start with one line.
func TestHostHookDirect(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	vethUp(t, "hklower0", "hkpeer0")
	f, err := macvtap.ReadFeatures("hklower0")
	if err != nil {
		t.Fatal(err)
	}
	xml := `<domain type='qemu'><name>hookdirect</name>
  <metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"><netctl:interface mac="52:54:00:aa:00:03"/></netctl:hook></metadata>
  <devices><interface type='direct'><mac address='52:54:00:aa:00:03'/><source dev='LOWER' mode='bridge'/><model type='virtio'/></interface></devices>
</domain>`
	before := linkNames(t)
	r := e.hook(t, []byte(strings.Replace(xml, "LOWER", "hklower0", 1)), "hookdirect", "prepare", "begin", "-")
	if r.code != 0 {
		t.Fatalf("prepare: %+v", r)
	}
	for _, feat := range []string{"tx-checksum-ip-generic", "tx-scatter-gather", "tx-tcp-segmentation", "rx-gro"} {
		on, known := f.Active[feat]
		said := strings.Contains(r.stderr, feat+" is off")
		if known && !on != said {
			t.Errorf("hklower0 has %s %v; stderr %q", feat, on, r.stderr)
		}
	}
	if after := linkNames(t); after != before {
		t.Errorf("a direct interface's prepare changed links: %v -> %v", before, after)
	}
	if r := e.hook(t, nil, "hookdirect", "release", "end", "-"); r.code != 0 {
		t.Fatalf("release: %+v", r)
	}
	if _, err := netlink.LinkByName("hklower0"); err != nil {
		t.Errorf("release deleted the lower device: %v", err)
	}
	r = e.hook(t, []byte(strings.Replace(xml, "LOWER", "nosuchlower", 1)), "hookdirect", "prepare", "begin", "-")
	if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "nosuchlower") {
		t.Errorf("prepare on a missing lower device: %+v", r)
	}
}

// raceXML is domain dom with its own tap own and the tap shared, which
// another domain names too.
func raceXML(dom, own, shared string, mac byte) []byte {
	return []byte(fmt.Sprintf(`<domain type='qemu'><name>%s</name>
  <metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1">
    <netctl:interface mac="52:54:00:9a:00:%02x"/><netctl:interface mac="52:54:00:9a:01:%02x"/>
  </netctl:hook></metadata>
  <devices>
    <interface type='ethernet'><mac address='52:54:00:9a:00:%02x'/><target dev='%s' managed='no'/><model type='virtio'/><driver queues='2'/></interface>
    <interface type='ethernet'><mac address='52:54:00:9a:01:%02x'/><target dev='%s' managed='no'/><model type='virtio'/><driver queues='2'/></interface>
  </devices>
</domain>`, dom, mac, mac, mac, own, mac, shared))
}

// TestHostHookTapRace: two domains that name the same new tap are
// prepared at once, by two netctl processes, round after round. Exactly
// one wins; the other exits 1 with one line naming the tap, undoes its
// own tap, and leaves the winner's alone: after the loser exits, the
// shared tap is there with the ifindex the winner recorded, and the
// winner's release deletes it. Two processes seldom reach the tap in the
// same microseconds, so here the name check usually decides; hook's
// TestHostHookTapRace races goroutines that do, where only the kernel's
// IFF_TUN_EXCL settles it.
func TestHostHookTapRace(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	doms := []struct {
		name, own string
		xml       []byte
	}{{"racea", "nctlra0", raceXML("racea", "nctlra0", "nctlrs0", 0xa)}, {"raceb", "nctlrb0", raceXML("raceb", "nctlrb0", "nctlrs0", 0xb)}}
	const rounds = 8
	wins := map[string]int{}
	for round := 0; round < rounds; round++ {
		var cmds []*exec.Cmd
		var errs []*bytes.Buffer
		for _, d := range doms {
			cmd := exec.Command(e.bin, "hook", "qemu", d.name, "prepare", "begin", "-")
			cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+e.run, "NETCTL_HOOK_CONFIG="+e.cfg)
			cmd.Stdin = bytes.NewReader(d.xml)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmds, errs = append(cmds, cmd), append(errs, &stderr)
		}
		for _, c := range cmds { // from the test goroutine: in its namespace
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		winner, loser := -1, -1
		for i, c := range cmds {
			err := c.Wait()
			switch code := c.ProcessState.ExitCode(); {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both domains prepared tap nctlrs0: %s and %s", round, doms[winner].name, doms[i].name)
				}
				winner = i
			case code == 1:
				loser = i
			default:
				t.Fatalf("round %d: %s: %v, stderr %q", round, doms[i].name, err, errs[i])
			}
		}
		if winner < 0 || loser < 0 {
			t.Fatalf("round %d: winner %d, loser %d; stderr %q %q", round, winner, loser, errs[0], errs[1])
		}
		wins[doms[winner].name]++
		if line := strings.TrimSpace(errs[loser].String()); strings.Contains(line, "\n") || !strings.Contains(line, "nctlrs0") || !strings.Contains(line, "ip link del nctlrs0") {
			t.Errorf("round %d: the loser's stderr is not one line about nctlrs0: %q", round, line)
		}
		rec, err := readDomainRecord(e, doms[winner].name)
		if err != nil || len(rec.Taps) != 2 {
			t.Fatalf("round %d: the winner's record: %+v, %v", round, rec, err)
		}
		l, err := netlink.LinkByName("nctlrs0")
		if err != nil || l.Attrs().Index != rec.Taps[1].Ifindex {
			t.Fatalf("round %d: nctlrs0 after the loser's undo: %v, %v; the winner recorded ifindex %d", round, l, err, rec.Taps[1].Ifindex)
		}
		if _, err := netlink.LinkByName(doms[loser].own); err == nil {
			t.Errorf("round %d: the loser's own tap %s was not undone", round, doms[loser].own)
		}
		if _, err := netlink.LinkByName(doms[winner].own); err != nil {
			t.Errorf("round %d: the winner's own tap %s: %v", round, doms[winner].own, err)
		}
		if st := execStatus(t, e, doms[loser].name); !strings.Contains(st, "prepared nothing") {
			t.Errorf("round %d: the loser left a record:\n%s", round, st)
		}
		for _, d := range doms {
			if r := e.hook(t, nil, d.name, "release", "end", "-"); r.code != 0 {
				t.Fatalf("round %d: release %s: %+v", round, d.name, r)
			}
		}
		if names := linkNames(t); names != "lo#1" {
			t.Fatalf("round %d: links after both releases: %v", round, names)
		}
	}
	t.Logf("wins over %d rounds: %v", rounds, wins)
}

func readDomainRecord(e *hookEnv, name string) (*state.Domain, error) {
	st, err := state.Open(e.run)
	if err != nil {
		return nil, err
	}
	return st.LoadDomain(name)
}
