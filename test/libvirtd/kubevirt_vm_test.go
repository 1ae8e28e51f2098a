package libvirtd_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/libvirtd"
	"github.com/netctl/netctl/virtio"
)

// TestVMLibvirtdKubevirtVhost: the binding plugin's vhost decision on a
// KVM domain, which this host cannot run (no vhost-net; TCG, for which
// libvirt never opens /dev/vhost-net): in the VM, a type='kvm' domain
// (a nested KVM guest) with KubeVirt's interface on a multiqueue vnet_hdr
// tap made beforehand, rewritten by kubevirt.DefineDomain for the test
// VMI (multiqueue, 4 vCPUs; the gRPC path is the host tests'), is
// started by the real libvirtd: QEMU's -netdev has vhost=on with 4 tap
// fds and 4 vhost fds, the device mq=on, and the L2 guest's virtio-net
// driver negotiates MQ.
func TestVMLibvirtdKubevirtVhost(t *testing.T) {
	testenv.Require(t, "vhost_net", nil)
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n := &nested{name: "kvnest", run: t.TempDir()}
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
	// As the CNI plugin makes it: persistent, multiqueue, vnet_hdr (the
	// VM's ip is busybox's, without tuntap).
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "kvtap0"}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_MULTI_QUEUE_DEFAULTS | netlink.TUNTAP_VNET_HDR, Queues: 1}
	if err := netlink.LinkAdd(tap); err != nil {
		t.Fatalf("the tap: %v", err)
	}
	for _, f := range tap.Fds {
		f.Close()
	}
	defer netlink.LinkDel(tap)
	console := l2.Run + "/kvnest-console.log"
	n.console = l2.Root + console
	dom := nestedDomainXML("kvm", n.name, n.vmlinux, n.initrd, console)
	dom = strings.Replace(dom, "<memballoon", strings.TrimLeft(kubevirtIface, " ")+"\n    <memballoon", 1)
	vmi, err := os.ReadFile("../../kubevirt/testdata/vmi.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := kubevirt.DefineDomain(kubevirt.Input{DomainXML: []byte(dom), VMI: vmi}, kubevirt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the binding's domain:\n%s", res.DomainXML)
	xmlPath := l2.Run + "/kvnest.xml"
	if err := os.WriteFile(l2.Root+xmlPath, res.DomainXML, 0o644); err != nil {
		t.Fatal(err)
	}
	readConsole := func() string { b, _ := os.ReadFile(n.console); return string(b) }
	start := time.Now()
	if out, err := n.lvd.Virsh(ctx, "create", xmlPath); err != nil {
		t.Fatalf("virsh create: %v\n%s\n%s", err, out, stuck(n.name))
	}
	defer n.lvd.Virsh(context.Background(), "destroy", n.name)
	for !strings.Contains(readConsole(), "L2-INIT") && !bootDeath.MatchString(readConsole()) && ctx.Err() == nil && time.Since(start) < 4*time.Minute {
		time.Sleep(time.Second)
	}
	if !strings.Contains(readConsole(), "L2-INIT") {
		t.Fatalf("the L2 guest did not boot in %v:\n%s\n%s", time.Since(start).Round(time.Second), readConsole(), stuck(n.name))
	}
	pidb, err := os.ReadFile(l2.Root + "/run/libvirt/qemu/" + n.name + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	n.pid, _ = strconv.Atoi(strings.TrimSpace(string(pidb)))
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(n.pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	dev, netdev := qemuNIC(t, args, "02:00:00:00:00:01")
	t.Logf("QEMU's -device: %v\n-netdev: %v", dev, netdev)
	if netdev["vhost"] != "on" || len(strings.Split(netdev["fds"], ":")) != 4 || len(strings.Split(netdev["vhostfds"], ":")) != 4 {
		t.Errorf("-netdev %v: want vhost=on with 4 tap fds and 4 vhost fds", netdev)
	}
	if dev["mq"] != "on" || dev["id"] != "ua-default" || dev["acpi-index"] != "3" {
		t.Errorf("-device %v: want mq=on, id ua-default, acpi-index 3", dev)
	}
	if !n.holds("/dev/vhost-net") {
		t.Errorf("QEMU holds no /dev/vhost-net")
	}
	if f := guestNIC(ctx, t, n, "02:00:00:00:00:01"); !f.Has(virtio.NetMQ) {
		t.Errorf("the L2 guest's virtio-net did not negotiate MQ: %v", f)
	}
}
