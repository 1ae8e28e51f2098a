package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
)

// The calls here are libvirt's on the destination of an incoming
// migration (libvirt 9.0): qemuMigrationDstPrepareAny
// (src/qemu/qemu_migration.c) runs the hook as `NAME migrate begin -`
// through virHookCall (src/util/virhook.c; extra NULL becomes "-") with
// the migratable domain XML on stdin, takes a non-empty stdout as the
// domain's new XML, and cancels the migration on a non-zero exit; then
// qemuProcessInit (src/qemu/qemu_process.c) runs `NAME prepare begin -`,
// and qemuProcessStop `NAME release end -` (libvirt 10.5+: the shut-off
// reason, "migrated" on the source, "failed" on a destination whose
// migration failed, instead of "-"). A real libvirtd cannot be made to
// migrate here: libvirt refuses a migration to the libvirtd it runs on.

// hookInProcess runs `netctl hook qemu --config CFG --run-dir RUN -- ARGS`
// as the installed script does, in this process, with stdin: exit code,
// stdout, stderr.
func hookInProcess(t *testing.T, cfg, run string, stdin []byte, args ...string) result {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(stdin)
	f.Seek(0, 0)
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old; f.Close() }()
	var stdout, stderr bytes.Buffer
	code := runMain(append([]string{"netctl", "hook", "qemu", "--config", cfg, "--run-dir", run, "--"}, args...), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// TestHookMigrateBeginCLIPassesBy: migrate begin of a domain netctl
// manages nothing in exits 0 and prints nothing, on stdout (libvirt
// would take it for the domain's new XML) or stderr, even when the host
// config (here: its plan) does not load; a domain that names netctl is
// refused then, with one line on stderr and nothing on stdout.
func TestHookMigrateBeginCLIPassesBy(t *testing.T) {
	d := t.TempDir()
	cfg := filepath.Join(d, "hook.json")
	if err := os.WriteFile(cfg, []byte(`{"log": "-", "plan": "/nonexistent/pool.json"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(d, "run")
	xml := readTestdata(t, "ethernet.xml")
	start, end := bytes.Index(xml, []byte("<metadata>")), bytes.Index(xml, []byte("</metadata>"))+len("</metadata>")
	plain := append(append([]byte{}, xml[:start]...), xml[end:]...)
	if r := hookInProcess(t, cfg, run, plain, "hookdom", "migrate", "begin", "-"); r != (result{0, "", ""}) {
		t.Errorf("migrate begin of a domain netctl does not manage: %+v; want exit 0 and no output", r)
	}
	r := hookInProcess(t, cfg, run, xml, "hookdom", "migrate", "begin", "-")
	if r.code == 0 || r.stdout != "" {
		t.Fatalf("migrate begin of a netctl domain with a broken config: %+v; want a refusal and nothing on stdout", r)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "plan /nonexistent/pool.json does not exist") {
		t.Errorf("stderr is not one line saying why: %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(run, "hook")); err == nil {
		t.Error("migrate begin wrote records")
	}
}

// TestHostHookMigrateBegin: the real binary on this host's real probe
// (tun, vhost-net if any, the installed QEMU). A domain whose interface
// asks for vhost-net (<driver name='vhost'>, type='kvm') is refused where
// this host has no /dev/vhost-net; a userspace one (type='qemu') whose
// machine type rules out USO (pc-i440fx-7.2) comes in: stdout stays empty
// in both cases, and nothing is created. Then the incoming domain's
// prepare, started and release (with 10.5's "migrated" extra) make and
// delete its tap.
func TestHostHookMigrateBegin(t *testing.T) {
	bin := netctlBinary(t)
	testenv.Host(t)
	e := newHookEnv(t, bin)
	xml := bytes.Replace(readTestdata(t, "ethernet.xml"), []byte("machine='pc'"), []byte("machine='pc-i440fx-7.2'"), 1)
	vhostXML := bytes.Replace(bytes.Replace(xml, []byte("<domain type='qemu'>"), []byte("<domain type='kvm'>"), 1),
		[]byte("<driver queues='4'/>"), []byte("<driver name='vhost' queues='4'/>"), 1)
	before := linkNames(t)
	r := e.hook(t, vhostXML, "hookdom", "migrate", "begin", "-")
	if _, err := os.Stat("/dev/vhost-net"); err != nil {
		if r.code == 0 || r.stdout != "" {
			t.Fatalf("migrate begin of a vhost-net interface on a host without vhost-net: %+v; want a refusal, nothing on stdout", r)
		}
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "52:54:00:e5:48:58") || !strings.Contains(lines[0], "vhost-net") {
			t.Errorf("stderr is not one line naming the interface and vhost-net: %q", r.stderr)
		}
	} else if r.stdout != "" {
		t.Errorf("migrate begin printed on stdout: %q", r.stdout)
	}
	r = e.hook(t, xml, "hookdom", "migrate", "begin", "-")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "can come here: backend userspace") {
		t.Fatalf("migrate begin of a userspace interface: %+v; want exit 0, nothing on stdout", r)
	}
	if after := linkNames(t); after != before {
		t.Errorf("migrate begin changed the links: %v -> %v", before, after)
	}
	if st := execStatus(t, e); !strings.Contains(st, "prepared nothing") {
		t.Errorf("migrate begin left a record:\n%s", st)
	}
	if r := e.hook(t, xml, "hookdom", "prepare", "begin", "-"); r.code != 0 || r.stdout != "" {
		t.Fatalf("prepare: %+v", r)
	}
	l, err := netlink.LinkByName("nctlhk0")
	if err != nil || l.Attrs().MTU != 9000 || l.(*netlink.Tuntap).Flags&netlink.TUNTAP_MULTI_QUEUE == 0 {
		t.Fatalf("prepare on the destination: %v %+v; want multiqueue tap nctlhk0 with MTU 9000", err, l)
	}
	if r := e.hook(t, xml, "hookdom", "started", "begin", "-"); r.code != 0 {
		t.Fatalf("started: %+v", r)
	}
	if r := e.hook(t, xml, "hookdom", "release", "end", "migrated"); r.code != 0 {
		t.Fatalf("release end migrated: %+v", r)
	}
	if _, err := netlink.LinkByName("nctlhk0"); err == nil {
		t.Error("release left nctlhk0")
	}
}
