package libvirtd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/launcher"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/test/pool"
)

// kubevirtIface is the interface as KubeVirt's tap attachment writes it
// (kubevirt/testdata/domain-tap.xml's, on this test's tap and PCI slot):
// ethernet on a tap made beforehand (managed='no'), KubeVirt's alias
// ua-<name>, its multiqueue <driver queues>, MAC, ACPI index, ROM off.
const kubevirtIface = `    <interface type='ethernet'>
      <source/>
      <target dev='kvtap0' managed='no'/>
      <model type='virtio-non-transitional'/>
      <driver queues='4'/>
      <mac address='02:00:00:00:00:01'/>
      <acpi index='3'/>
      <alias name='ua-default'/>
      <rom enabled='no'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/>
    </interface>`

// TestHostLibvirtdKubevirtSidecar: the binding plugin end to end on a
// real libvirtd. netctl kubevirt sidecar runs unprivileged (uid 65534)
// with the 6.1+6.12 pool plan; a virt-launcher client (test/launcher)
// finds its socket, asks Info and sends OnDefineDomain a domain with
// KubeVirt's interface on a multiqueue vnet_hdr tap made beforehand (as
// the CNI plugin makes it), the qemu namespace and a <qemu:commandline>,
// and the test VMI (multiqueue, 4 vCPUs). libvirtd defines and starts
// the domain it answers; QEMU's command line has the pinned NIC: 4
// queues (mq, vectors 10, 4 tap fds), every offload property the plan
// pins, queue_reset off (the <qemu:override>; host_uso and guest_uso4/6
// off too where QEMU is 8.2+, left out on Debian 12's 7.2, which lacks
// them and so offers no USO: the sidecar's --qemu),
// the MAC, ACPI index and PCI slot KubeVirt gave, and the user's -msg
// timestamp=on; the guest's pings cross the tap.
//
// On this host (TCG, no /dev/vhost-net) libvirt starts a type='qemu'
// domain with <driver name='vhost'> on QEMU's userspace virtio-net
// without an error: qemuInterfaceOpenVhostNet returns before opening
// /dev/vhost-net unless the domain is type='kvm' (KubeVirt's are, where
// the node has KVM). That QEMU's netdev then has no vhost=on is checked
// here; vhost itself is what the 6.12 VM's tests of the hook show.
func TestHostLibvirtdKubevirtSidecar(t *testing.T) {
	root, err := os.MkdirTemp("", "kvhooks-") // short: a unix socket path has 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	bin := buildNetctl(t, root)
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(root, "hooks", "hook-sidecar-0")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sockDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	plan, _ := pool.Of(t, "probe-6.1.json", "probe-6.12.json")
	pj, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	planPath := filepath.Join(root, "pool.json")
	if err := os.WriteFile(planPath, pj, 0o644); err != nil {
		t.Fatal(err)
	}
	// virt-launcher's QEMU is this host's here: the sidecar is told its
	// version, as an operator tells it that of the virt-launcher image.
	vout, err := exec.Command("qemu-system-x86_64", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	qemuVersion := ""
	if f := strings.Fields(string(vout)); len(f) >= 4 && f[0] == "QEMU" {
		qemuVersion = f[3]
	}
	hasUSO, known := policy.QEMUHasProp(qemuVersion, "guest_uso4")
	if !known {
		t.Fatalf("qemu-system-x86_64 --version: %q", vout)
	}
	sc := exec.Command(bin, "kubevirt", "sidecar", "--socket-dir", sockDir, "--plan", planPath, "--qemu", qemuVersion)
	sc.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var scLog bytes.Buffer
	sc.Stderr = &scLog
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sc.Process.Signal(syscall.SIGTERM)
		sc.Wait()
		t.Logf("the sidecar's log:\n%s", scLog.String())
	}()

	d := libvirtd.New(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "tuntap", "add", "dev", "kvtap0", "mode", "tap", "multi_queue", "vnet_hdr").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v\n%s", err, out)
	}
	defer exec.Command("ip", "link", "del", "kvtap0").Run()
	g, err := d.NewGuest(ctx, "kubevirt", guestScript)
	if err != nil {
		t.Fatal(err)
	}
	dom := g.DomainXML("", kubevirtIface)
	dom = strings.Replace(dom, "<domain type='qemu'>", `<domain type='qemu' xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">`, 1)
	dom = strings.Replace(dom, "</domain>", "  <qemu:commandline>\n    <qemu:arg value='-msg'/>\n    <qemu:arg value='timestamp=on'/>\n  </qemu:commandline>\n</domain>", 1)
	vmi, err := os.ReadFile("../../kubevirt/testdata/vmi.json")
	if err != nil {
		t.Fatal(err)
	}

	hooks, err := launcher.Collect(ctx, filepath.Dir(sockDir), 1, 20*time.Second)
	if err != nil {
		t.Fatalf("%v\nthe sidecar's log:\n%s", err, scLog.String())
	}
	out, err := hooks[0].OnDefineDomain(ctx, []byte(dom), vmi)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OnDefineDomain's answer:\n%s", out)
	f := filepath.Join(g.Dir, "domain.xml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := d.Virsh("define", f); err != nil {
		t.Fatalf("libvirt refuses the sidecar's domain: %v\n%s", err, o)
	}
	defer d.Virsh("undefine", "kubevirt")
	def, err := d.Virsh("dumpxml", "--inactive", "kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	var ld libvirtxml.Domain
	if err := ld.Unmarshal(def); err != nil {
		t.Fatal(err)
	}
	if ld.QEMUCommandline == nil || len(ld.QEMUCommandline.Args) != 2 || ld.QEMUOverride == nil || len(ld.QEMUOverride.Devices) != 1 || ld.QEMUOverride.Devices[0].Alias != "ua-default" {
		t.Errorf("libvirt's definition lost the <qemu:commandline> or the override:\n%s", def)
	}
	if o, err := d.Virsh("start", "kubevirt"); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	defer d.Virsh("destroy", "kubevirt")
	pidb, err := os.ReadFile("/run/libvirt/qemu/kubevirt.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	dev, netdev := qemuNIC(t, args, "02:00:00:00:00:01")
	t.Logf("QEMU's -device: %v\n-netdev: %v", dev, netdev)
	want := map[string]string{
		"id": "ua-default", "mq": "on", "vectors": "10", "acpi-index": "3", "addr": "0x5",
		"csum": "on", "host_tso4": "on", "host_tso6": "on", "guest_csum": "on", "guest_tso4": "on", "guest_tso6": "on",
		"mrg_rxbuf": "on", "event_idx": "on",
		"queue_reset": "off",
	}
	for _, p := range []string{"host_uso", "guest_uso4", "guest_uso6"} {
		if hasUSO {
			want[p] = "off"
		} else if dev[p] != "" {
			t.Errorf("QEMU %s has no %s property, and the sidecar set it: %v", qemuVersion, p, dev)
		}
	}
	for k, v := range want {
		if dev[k] != v {
			t.Errorf("QEMU's virtio-net %s=%q, want %q", k, dev[k], v)
		}
	}
	if fds := strings.Split(netdev["fds"], ":"); netdev["type"] != "tap" || len(fds) != 4 {
		t.Errorf("-netdev %v: want a tap with 4 fds", netdev)
	}
	if netdev["vhost"] == "on" {
		t.Errorf("vhost=on on a TCG domain on a host without vhost-net: %v", netdev)
	}
	if !strings.Contains(strings.Join(args, " "), "-msg timestamp=on") {
		t.Errorf("QEMU lacks the <qemu:commandline>'s -msg timestamp=on: %q", args)
	}
	if _, err := g.WaitConsole(ctx, "GUEST-NET-UP"); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, "kvtap0", "10.78.0.1/24")
	guest.HostPing(t, "10.78.0.2", 3)

	if err := hooks[0].Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- sc.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the sidecar after Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the sidecar did not exit after Shutdown")
	}
	if _, err := os.Lstat(hooks[0].Socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left: %v", err)
	}
}
