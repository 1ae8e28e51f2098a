package libvirtd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/virtio"
)

// nestedDomainXML is a transient domain of type typ ('kvm': a nested KVM
// guest, see l2.LoadKVM; 'qemu': TCG) booting the L2 kernel and
// initramfs (test/l2: its init reports every NIC, hotplugged ones too,
// with the driver's feature word) with no NIC: shared memfd RAM, as a
// VDUSE device needs; paths as the chroot sees them.
func nestedDomainXML(typ, name, vmlinux, initrd, console string) string {
	return `<domain type='` + typ + `'>
  <name>` + name + `</name>
  <memory unit='MiB'>256</memory>
  <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>` + vmlinux + `</kernel>
    <initrd>` + initrd + `</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 mitigations=off ` + l2.BootTrims + `</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='` + console + `'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>`
}

// stuck says where the domain's QEMU and the kernel are, for a boot that
// hangs: QEMU's threads' kernel stacks and states, and the kernel's log.
func stuck(name string) string {
	var b strings.Builder
	pidb, _ := os.ReadFile(l2.Root + "/run/libvirt/qemu/" + name + ".pid")
	pid := strings.TrimSpace(string(pidb))
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*")
	for _, task := range tasks {
		comm, _ := os.ReadFile(task + "/comm")
		wchan, _ := os.ReadFile(task + "/wchan")
		stat, _ := os.ReadFile(task + "/stat")
		stack, _ := os.ReadFile(task + "/stack")
		fmt.Fprintf(&b, "%s %s wchan=%s stat=%s\n%s\n", task, strings.TrimSpace(string(comm)), wchan, strings.TrimSpace(string(stat)), stack)
	}
	qlog, _ := os.ReadFile(l2.Root + "/var/log/libvirt/qemu/" + name + ".log")
	fmt.Fprintf(&b, "libvirt's log of %s:\n%s\n", name, qlog)
	if out, err := exec.Command("dmesg").CombinedOutput(); err == nil {
		lines := strings.Split(string(out), "\n")
		fmt.Fprintf(&b, "dmesg (last 40 lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}

// bootDeath: the L2 kernel died while booting (TCG inside TCG does now
// and then on a loaded host; nothing to do with netctl).
var bootDeath = regexp.MustCompile(`Kernel panic - not syncing|Oops: |BUG: kernel`)

// treeNetctl is bin/netctl of this tree (make build).
func treeNetctl(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../bin/netctl") // the package is test/libvirtd
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v: run make build first (a static netctl, CGO_ENABLED=0)", p, err)
	}
	return p
}

// nested is the test's domain: its libvirtd, QEMU and console.
type nested struct {
	lvd     *libvirtd.Chrooted
	name    string
	console string // as L1 sees it
	pid     int
	run     string // netctl's NETCTL_RUN_DIR
	bin     string
	vmlinux string // the L2 files as the chroot sees them
	initrd  string
}

func (n *nested) netctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, n.bin, args...)
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+n.run)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// iface is the live domain's interface with alias, or nil.
func (n *nested) iface(ctx context.Context, t *testing.T, alias string) *libvirtxml.DomainInterface {
	t.Helper()
	out, err := n.lvd.Virsh(ctx, "dumpxml", n.name)
	if err != nil {
		t.Fatalf("virsh dumpxml: %v\n%s", err, out)
	}
	x, err := libvirtdom.ParseDomain([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if x.Devices == nil {
		return nil
	}
	for i := range x.Devices.Interfaces {
		if libvirtdom.Alias(&x.Devices.Interfaces[i]) == alias {
			return &x.Devices.Interfaces[i]
		}
	}
	return nil
}

// holds says whether the domain's QEMU holds an fd whose link ends in
// suffix (QEMU runs in the chroot; its fds are L1's devices).
func (n *nested) holds(suffix string) bool {
	fds, _ := l2.FDs(n.pid)
	for l := range fds {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

func (n *nested) records() []string {
	m, _ := filepath.Glob(filepath.Join(n.run, "nics", "*.json"))
	return m
}

// TestVMLibvirtdAttach: netctl attach and detach on a running libvirt
// domain of a real libvirtd in the VM (the host's, chrooted:
// libvirtd.Chrooted) whose guest is a nested Linux (test/l2's kernel and
// init, booted by libvirt):
//   - vhost_net: the domain is type='kvm' (a nested KVM guest: TCG
//     emulates AMD SVM, l2.LoadKVM): the NIC is vhost-started with the
//     decided offloads and diagnose explains it; on a type='qemu'
//     domain, for which libvirt never opens /dev/vhost-net, vhost-net is
//     refused or passed over with that reason (testLibvirtdVhostNet).
//   - vdpa: attach --mgmtdev vduse creates vdpa device netctl-ID on a
//     VDUSE device (test/vduse serves it) and libvirt hotplugs it as
//     <interface type='vdpa'> on its /dev/vhost-vdpa-N, which QEMU holds;
//     detach removes the interface and the device. Without vDPA (6.1)
//     the same attach is refused and leaves nothing.
func TestVMLibvirtdAttach(t *testing.T) {
	testenv.Require(t, "vhost_net", nil)
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	n := &nested{name: "lvnest", run: t.TempDir(), bin: treeNetctl(t)}
	// KVM first: libvirtd's capability probe decides whether type='kvm'
	// domains can run.
	if err := l2.LoadKVM(); err != nil {
		t.Fatal(err)
	}
	n.lvd = libvirtd.NewChrooted(t)
	if err := n.lvd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.vmlinux, n.initrd, err = l2.PrepareFiles(ctx, vmlinuz); err != nil {
		t.Fatal(err)
	}
	console := l2.Run + "/lvnest-console.log"
	n.console = l2.Root + console
	xmlPath := l2.Run + "/lvnest.xml"
	if err := os.WriteFile(l2.Root+xmlPath, []byte(nestedDomainXML("kvm", n.name, n.vmlinux, n.initrd, console)), 0o644); err != nil {
		t.Fatal(err)
	}
	readConsole := func() string { b, _ := os.ReadFile(n.console); return string(b) }
	// Boot, again if the L2 kernel died booting (up to three boots).
	for attempt := 1; ; attempt++ {
		os.Remove(n.console)
		start := time.Now()
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := n.lvd.Virsh(cctx, "create", xmlPath)
		ccancel()
		if err != nil {
			t.Fatalf("virsh create: %v\n%s\n%s", err, out, stuck(n.name))
		}
		// A KVM guest boots in seconds: give it 3 minutes.
		for !strings.Contains(readConsole(), "L2-INIT") && !bootDeath.MatchString(readConsole()) && ctx.Err() == nil && time.Since(start) < 3*time.Minute {
			time.Sleep(time.Second)
		}
		if !strings.Contains(readConsole(), "L2-INIT") && !bootDeath.MatchString(readConsole()) {
			cmdline, _ := os.ReadFile(l2.Root + "/run/libvirt/qemu/" + n.name + ".pid")
			if pid, err := strconv.Atoi(strings.TrimSpace(string(cmdline))); err == nil {
				cmdline, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			}
			qlog, _ := os.ReadFile(l2.Root + "/var/log/libvirt/qemu/" + n.name + ".log")
			t.Fatalf("the L2 guest did not boot in %v; QEMU: %s\nlibvirt's log of it:\n%s\nconsole:\n%s",
				time.Since(start).Round(time.Second), strings.ReplaceAll(string(cmdline), "\x00", " "), qlog, readConsole())
		}
		if !bootDeath.MatchString(readConsole()) || attempt == 3 {
			t.Logf("L2 init after %v", time.Since(start).Round(time.Second))
			break
		}
		t.Logf("the L2 kernel died booting (boot %d), again; console:\n%s", attempt, readConsole())
		n.lvd.Virsh(ctx, "destroy", n.name)
	}
	if !strings.Contains(readConsole(), "L2-INIT") {
		t.Fatalf("the L2 guest did not boot:\n%s", readConsole())
	}
	pidb, err := os.ReadFile(l2.Root + "/run/libvirt/qemu/" + n.name + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	n.pid, _ = strconv.Atoi(strings.TrimSpace(string(pidb)))

	t.Run("vhost_net", func(t *testing.T) { testLibvirtdVhostNet(ctx, t, n) })
	t.Run("vdpa", func(t *testing.T) { testLibvirtdVDPA(ctx, t, n) })
}

// guestNIC waits for the L2 init's line for mac and returns the driver's
// feature word.
func guestNIC(ctx context.Context, t *testing.T, n *nested, mac string) virtio.Features {
	t.Helper()
	for {
		b, _ := os.ReadFile(n.console)
		if g, ok := l2.ParseNICs(string(b))[mac]; ok {
			var f virtio.Features
			for i, c := range g.Features {
				if c == '1' && i < 64 {
					f |= virtio.Bit(uint(i))
				}
			}
			t.Logf("guest: %s driver %s features %v", g.Name, g.Driver, f)
			return f
		}
		select {
		case <-ctx.Done():
			b, _ := os.ReadFile(n.console)
			t.Fatalf("no L2-NIC line for %s: %v\n%s", mac, ctx.Err(), b)
		case <-time.After(time.Second):
		}
	}
}

// virtioStatus is x-query-virtio-status of the domain's device with
// alias, through libvirt's monitor passthrough.
func virtioStatus(ctx context.Context, t *testing.T, n *nested, alias string) *l2.VirtioStatus {
	t.Helper()
	c, err := libvirtdom.Dial(ctx, n.lvd.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dom, err := c.Lookup(ctx, n.name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := `{"execute":"x-query-virtio-status","arguments":{"path":"/machine/peripheral/` + alias + `/virtio-backend"}}`
	r, err := c.MonitorCommand(ctx, dom, cmd)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Return json.RawMessage `json:"return"`
	}
	var st l2.VirtioStatus
	if err := json.Unmarshal(r.Reply, &reply); err != nil || json.Unmarshal(reply.Return, &st) != nil {
		t.Fatalf("x-query-virtio-status: %v\n%s", err, r.Reply)
	}
	st.Raw = reply.Return
	return &st
}

// qemuWord is the bits of QEMU's feature names (those virtio names).
func qemuWord(f l2.Features) virtio.Features {
	w := virtio.Features(f.Unknown)
	for _, name := range f.Names() {
		if b, ok := virtio.ParseFeature(name); ok {
			w |= b
		}
	}
	return w
}

// testLibvirtdVhostNet: on the type='kvm' domain (a nested KVM guest)
// netctl attach decides vhost-net and libvirt hotplugs the tap with a
// live <driver name='vhost'> carrying every offload attribute as decided;
// QEMU holds /dev/vhost-net and x-query-virtio-status (through libvirt's
// monitor passthrough) says DRIVER_OK and vhost-started, QEMU offers
// exactly the decided offloads and the guest driver negotiated only
// offered ones; diagnose --vm explains the NIC as vhost-net; detach
// removes the interface, the tap and the record. On a type='qemu' domain
// (started paused beside it), for which libvirt never opens
// /dev/vhost-net whatever <driver name='vhost'> says, --backend vhost-net
// is refused with that reason and leaves nothing, and auto decides
// userspace with the reason.
func testLibvirtdVhostNet(ctx context.Context, t *testing.T, n *nested) {
	const mac = "52:54:00:97:00:01"
	taps := func() []string { m, _ := filepath.Glob("/sys/class/net/nctl*"); return m }

	t.Run("type_qemu", func(t *testing.T) {
		const tcg = "lvtcg"
		xmlPath := l2.Run + "/lvtcg.xml"
		if err := os.WriteFile(l2.Root+xmlPath, []byte(nestedDomainXML("qemu", tcg, n.vmlinux, n.initrd, l2.Run+"/lvtcg-console.log")), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := n.lvd.Virsh(ctx, "create", xmlPath, "--paused"); err != nil {
			t.Fatalf("virsh create --paused: %v\n%s", err, out)
		}
		defer n.lvd.Virsh(ctx, "destroy", tcg)
		out, err := n.netctl(ctx, "attach", "--vm", tcg, "--libvirt", n.lvd.URI, "--id", "net1", "--backend", "vhost-net", "--mac", mac)
		t.Logf("attach --backend vhost-net on a type='qemu' domain: %v %s", err, strings.TrimSpace(out))
		if err == nil || !strings.Contains(out, "type 'kvm'") {
			t.Errorf("attach --backend vhost-net on a type='qemu' domain: %v\n%s (want a refusal naming type 'kvm')", err, out)
		}
		if r, tp := n.records(), taps(); len(r) != 0 || len(tp) != 0 {
			t.Fatalf("after the refusal: records %v, taps %v", r, tp)
		}
		out, err = n.netctl(ctx, "attach", "--vm", tcg, "--libvirt", n.lvd.URI, "--id", "net1", "--mac", mac, "--json")
		if err != nil {
			t.Fatalf("netctl attach on a type='qemu' domain: %v\n%s", err, out)
		}
		var nic state.NIC
		if err := json.Unmarshal([]byte(out), &nic); err != nil || nic.Backend != policy.BackendUserspace {
			t.Fatalf("attach --json on a type='qemu' domain (want userspace): %v\n%s", err, out)
		}
		for _, s := range nic.Steps {
			if s.Backend == policy.BackendVhostNet && !strings.Contains(s.Reason, "type 'kvm'") {
				t.Errorf("vhost-net's step: %q (want the domain type's reason)", s.Reason)
			}
		}
		if out, err := n.netctl(ctx, "detach", "--vm", tcg, "--libvirt", n.lvd.URI, "--id", "net1", "--timeout", "5s"); err != nil {
			// A paused guest cannot let go of a NIC: libvirt's destroy
			// below ends it, and the record goes with the domain.
			t.Logf("detach from the paused domain: %v %s", err, strings.TrimSpace(out))
		}
	})
	// The domain is gone (this libvirtd runs no hook to release it):
	// detach of a domain libvirt no longer knows deletes what netctl made.
	n.lvd.Virsh(ctx, "destroy", "lvtcg")
	if out, err := n.netctl(ctx, "detach", "--vm", "lvtcg", "--libvirt", n.lvd.URI, "--id", "net1"); err != nil {
		t.Errorf("detach from the destroyed domain: %v\n%s", err, out)
	}
	if r, tp := n.records(), taps(); len(r) != 0 || len(tp) != 0 {
		t.Fatalf("after the type='qemu' domain: records %v, taps %v", r, tp)
	}

	out, err := n.netctl(ctx, "attach", "--vm", n.name, "--libvirt", n.lvd.URI, "--id", "net1", "--mac", mac, "--json")
	if err != nil {
		t.Fatalf("netctl attach: %v\n%s", err, out)
	}
	var nic state.NIC
	if err := json.Unmarshal([]byte(out), &nic); err != nil || nic.Tap == nil || nic.Backend != policy.BackendVhostNet {
		t.Fatalf("attach --json (want vhost-net on a tap): %v\n%s", err, out)
	}
	var offer virtio.Features
	for _, s := range nic.Features {
		b, ok := virtio.ParseFeature(s)
		if !ok {
			t.Fatalf("decided feature %q has no bit", s)
		}
		offer |= b
	}
	t.Logf("decided: %s offering %v; steps %+v", nic.Backend, offer, nic.Steps)

	// The live XML pins the decision.
	x := n.iface(ctx, t, "ua-netctl-net1")
	if x == nil {
		t.Fatal("no interface ua-netctl-net1 in the live domain")
	}
	if x.Driver == nil || x.Driver.Name != "vhost" || x.Target == nil || x.Target.Dev != nic.Tap.Name {
		s, _ := x.Marshal()
		t.Fatalf("live interface (want <driver name='vhost'> on %s):\n%s", nic.Tap.Name, s)
	}
	want := libvirtdom.DriverFor(nil, policy.Decision{Backend: policy.BackendVhostNet, Offer: offer}, 0).Driver
	if !samePtr(x.Driver.Host, want.Host) || !samePtr(x.Driver.Guest, want.Guest) {
		got, _ := x.Marshal()
		t.Errorf("live <driver> offloads differ from the decision's: want host %+v guest %+v\n%s", want.Host, want.Guest, got)
	}
	if !n.holds("/dev/vhost-net") {
		t.Errorf("QEMU (pid %d) holds no /dev/vhost-net for a vhost-net NIC", n.pid)
	}

	// The guest's driver takes the NIC, with the decided features, and
	// QEMU runs it on vhost-net.
	guest := guestNIC(ctx, t, n, mac)
	var st *l2.VirtioStatus
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st = virtioStatus(ctx, t, n, "ua-netctl-net1")
		if (st.DriverOK() && st.VhostStarted) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if !st.DriverOK() || !st.VhostStarted {
		t.Errorf("x-query-virtio-status: DRIVER_OK %v, vhost-started %v (want vhost-net running):\n%s", st.DriverOK(), st.VhostStarted, st.Raw)
	}
	host, acked := qemuWord(st.Host), qemuWord(st.Guest)
	t.Logf("QEMU offers %v, the guest acked %v", host, acked)
	managed := virtio.Features(0)
	for _, b := range []virtio.Features{virtio.NetCsum, virtio.NetGuestCsum, virtio.NetHostTSO4, virtio.NetHostTSO6, virtio.NetHostECN,
		virtio.NetHostUFO, virtio.NetGuestTSO4, virtio.NetGuestTSO6, virtio.NetGuestECN, virtio.NetGuestUFO, virtio.NetMrgRxbuf, virtio.EventIdx} {
		managed |= b
	}
	if host&managed != offer&managed {
		t.Errorf("QEMU offers %v of the decided offloads, the decision %v", host&managed, offer&managed)
	}
	if guest&^host != 0 || acked != guest {
		t.Errorf("the guest driver's features %v: beyond QEMU's offer %v, or not what QEMU saw acked %v", guest, host, acked)
	}
	if guest&managed&^offer != 0 {
		t.Errorf("the guest negotiated %v, which the decision left out", guest&managed&^offer)
	}

	// diagnose --vm explains it, from libvirt and (opted in) QEMU.
	out, err = n.netctl(ctx, "diagnose", "--vm", n.name, "--libvirt", n.lvd.URI, "--no-probe")
	t.Logf("netctl diagnose --vm %s:\n%s", n.name, out)
	if err != nil || !strings.Contains(out, "ua-netctl-net1") || !strings.Contains(out, "driver vhost") {
		t.Errorf("diagnose --vm: %v: want ua-netctl-net1 on driver vhost\n%s", err, out)
	}
	out, err = n.netctl(ctx, "diagnose", "--vm", n.name, "--libvirt", n.lvd.URI, "--qemu-monitor", "--no-probe", "--json")
	var dj struct {
		Explain *struct {
			NIC     string   `json:"nic"`
			Backend string   `json:"backend"`
			Status  []string `json:"status"`
		} `json:"explain"`
	}
	if err != nil || json.Unmarshal([]byte(out), &dj) != nil || dj.Explain == nil || !strings.Contains(dj.Explain.Backend, "vhost-net moves the packets") {
		t.Errorf("diagnose --vm --qemu-monitor --json: %v: want the NIC explained as vhost-net\n%s", err, out)
	}
	out, _ = n.netctl(ctx, "diagnose", "--vm", n.name, "--libvirt", n.lvd.URI, "--qemu-monitor", "--no-probe")
	t.Logf("netctl diagnose --vm %s --qemu-monitor:\n%s", n.name, out)
	// The tap libvirt names is read for the explanation (before, every
	// offload said "the tap was not read" though the report read it).
	if strings.Contains(out, "the tap was not read") || !regexp.MustCompile(`GUEST_TSO4\s+7\s+yes\s+yes\s+yes`).MatchString(out) {
		t.Errorf("diagnose --vm --qemu-monitor: the explanation did not read the tap %s (want GUEST_TSO4's backend column yes)", nic.Tap.Name)
	}

	if out, err := n.netctl(ctx, "detach", "--vm", n.name, "--libvirt", n.lvd.URI, "--id", "net1"); err != nil {
		t.Fatalf("netctl detach: %v\n%s", err, out)
	}
	if x := n.iface(ctx, t, "ua-netctl-net1"); x != nil {
		t.Errorf("the interface is in the live domain after detach")
	}
	if _, err := os.Stat("/sys/class/net/" + nic.Tap.Name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tap %s after detach: %v", nic.Tap.Name, err)
	}
	if r := n.records(); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
	if n.holds("/dev/vhost-net") {
		t.Errorf("QEMU still holds /dev/vhost-net after detach")
	}
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func testLibvirtdVDPA(ctx context.Context, t *testing.T, n *nested) {
	const mac = "52:54:00:97:00:02"
	attach := func() (string, error) {
		return n.netctl(ctx, "attach", "--vm", n.name, "--libvirt", n.lvd.URI, "--id", "net2", "--mgmtdev", "vduse", "--mac", mac, "--json")
	}
	testenv.Require(t, "vdpa", func(m *testenv.Missing) {
		out, err := attach()
		m.Logf("attach --mgmtdev vduse without vDPA: %v %s", err, out)
		m.Check(err != nil && strings.Contains(out, "vdpa"), "attach --mgmtdev vduse without vDPA: %v %s, want a refusal naming vdpa", err, out)
		m.Check(len(n.records()) == 0, "records after the refusal: %v", n.records())
		m.Check(n.iface(ctx, m.T, "ua-netctl-net2") == nil, "an interface ua-netctl-net2 after the refusal")
	})
	testenv.Require(t, "vduse", nil)
	dev, err := vduse.Create(vduse.Config{Name: "netctl-net2"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := dev.Close(); err != nil {
			t.Errorf("destroying the VDUSE device: %v", err)
		}
	}()
	// The guest sees a vdpa device's own MAC (QEMU takes it over the
	// interface's), and a VDUSE device's is its owner's (test/vduse's
	// 02:00:00:00:0d:01): an explicit --mac that differs is refused and
	// leaves nothing; without --mac the interface takes the device's.
	devMAC := "02:00:00:00:0d:01"
	out, err := attach()
	if err == nil || !strings.Contains(out, "has MAC "+devMAC) {
		t.Errorf("attach --mgmtdev vduse --mac %s (the device has %s): %v\n%s (want a refusal naming the device's MAC)", mac, devMAC, err, out)
	}
	if _, serr := os.Stat("/sys/bus/vdpa/devices/netctl-net2"); len(n.records()) != 0 || n.iface(ctx, t, "ua-netctl-net2") != nil || serr == nil {
		t.Fatalf("after the MAC refusal: records %v, interface left, or vdpa device netctl-net2 (%v)", n.records(), serr)
	}
	out, err = n.netctl(ctx, "attach", "--vm", n.name, "--libvirt", n.lvd.URI, "--id", "net2", "--mgmtdev", "vduse", "--json")
	if err != nil {
		t.Fatalf("netctl attach --mgmtdev vduse: %v\n%s", err, out)
	}
	var nic state.NIC
	if err := json.Unmarshal([]byte(out), &nic); err != nil || nic.Backend != policy.BackendVDPA || nic.Tap != nil || nic.VDPA == nil ||
		nic.VDPA.Name != "netctl-net2" || !nic.VDPA.Created || nic.VDPA.Ino == 0 || !strings.HasPrefix(nic.VDPA.Vhost, "/dev/vhost-vdpa-") || nic.MAC != devMAC {
		t.Fatalf("attach --json (want the device's MAC %s): %v\n%s", devMAC, err, out)
	}
	x := n.iface(ctx, t, "ua-netctl-net2")
	if x == nil || x.MAC == nil || x.MAC.Address != devMAC {
		t.Errorf("live interface's MAC: want the device's %s", devMAC)
	}
	if x == nil || x.Source == nil || x.Source.VDPA == nil || x.Source.VDPA.Device != nic.VDPA.Vhost {
		s := ""
		if x != nil {
			s, _ = x.Marshal()
		}
		t.Fatalf("live interface (want type='vdpa' on %s):\n%s", nic.VDPA.Vhost, s)
	}
	if !n.holds(nic.VDPA.Vhost) {
		t.Errorf("QEMU (pid %d) holds no %s", n.pid, nic.VDPA.Vhost)
	}

	// Let the guest's driver finish with the device (TCG inside TCG, a
	// VDUSE device served by this process) before it is asked to let go.
	seen := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && !seen; time.Sleep(time.Second) {
		b, _ := os.ReadFile(n.console)
		if g, ok := l2.ParseNICs(string(b))[devMAC]; ok {
			t.Logf("guest: the vdpa NIC's driver %s, features %s", g.Driver, g.Features)
			seen = true
		}
	}
	if !seen {
		b, _ := os.ReadFile(n.console)
		st, _ := n.lvd.Virsh(ctx, "qemu-monitor-command", n.name, "--hmp", "info pci")
		t.Errorf("the guest reported no NIC with MAC %s in 90 s; console:\n%s\ninfo pci:\n%s\nQEMU:\n%s", devMAC, b, st, stuck(n.name))
	}
	// A guest slow to release the NIC leaves it pending; detach again
	// finishes it (detach's "still pending" semantics).
	for i := 0; ; i++ {
		out, err := n.netctl(ctx, "detach", "--vm", n.name, "--libvirt", n.lvd.URI, "--id", "net2", "--timeout", "90s")
		if err == nil {
			break
		}
		if i == 2 || !strings.Contains(out, "still pending") {
			t.Fatalf("netctl detach: %v\n%s", err, out)
		}
		t.Logf("detach %d: %s", i+1, strings.TrimSpace(out))
	}
	if x := n.iface(ctx, t, "ua-netctl-net2"); x != nil {
		t.Errorf("the vdpa interface is in the live domain after detach")
	}
	if n.holds(nic.VDPA.Vhost) {
		t.Errorf("QEMU still holds %s after detach", nic.VDPA.Vhost)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-net2"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("vdpa device netctl-net2 after detach: %v (want deleted)", err)
	}
	if r := n.records(); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
}
