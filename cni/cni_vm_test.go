package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vduse"
)

// makeNetns makes a network namespace bound at path (a pod's), leaving
// this thread where it was.
func makeNetns(t *testing.T, path string) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	err = unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr) // the thread stays locked and dies with the test
	}
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(path, unix.MNT_DETACH) })
}

// inPod runs fn on a thread inside the pod's namespace: what fn starts
// (QEMU, a packet socket) lives there.
func inPod(t *testing.T, path string, fn func()) {
	t.Helper()
	if err := inNetNS(path, func() error { fn(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestVMCNIVhostNet: the netctl binary (make build), run by libcni as a
// runtime runs it, ADDs a 2-queue tap in a pod's namespace with backend
// vhost-net; a firmware-only QEMU started in that namespace opens the
// tap by name with vhost=on (queues=2); after cont its guest (iPXE) sends
// DHCP over the tap and gets the replies (both ways), QEMU reports vhost
// started with DRIVER_OK, and the kernel runs its vhost worker. CHECK
// passes while QEMU holds the tap. After QEMU is gone, DEL leaves only lo
// in the pod, a second DEL succeeds, and L1's namespace is as before.
func TestVMCNIVhostNet(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	bin, err := filepath.Abs(filepath.Join("..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "netctl")); err != nil {
		t.Fatalf("the netctl binary: %v: run make build first", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	before := linkNames(t, "")
	pod := filepath.Join(t.TempDir(), "pod")
	makeNetns(t, pod)

	conf := `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","queues":2,"backend":"vhost-net","owner":107}]}`
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	cn := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x23, 0x01}
	rt := &libcni.RuntimeConf{ContainerID: "vmtest1", NetNS: pod, IfName: "eth0"}
	r, err := cn.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := types100.GetResult(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("kernel %s: ADD result %s", k.Name, b)
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "eth0" || res.Interfaces[0].Sandbox != pod {
		t.Fatalf("ADD result: %s", b)
	}
	l := link(t, pod, "eth0")
	if tp, ok := l.(*netlink.Tuntap); !ok || tp.Flags&netlink.TUNTAP_MULTI_QUEUE == 0 || tp.Owner != 107 || tp.Alias != hostnic.CNITapAlias {
		t.Fatalf("eth0 in the pod: %#v", l)
	}

	// QEMU in the pod's namespace opens the tap itself, with vhost-net.
	var g *l2.Guest
	var srv *l2.DHCPServer
	inPod(t, pod, func() {
		g, err = l2.StartFirmware(ctx, l2.Firmware{Name: "cni", Extra: []string{
			"-netdev", "tap,id=n0,ifname=eth0,script=no,downscript=no,vhost=on,vhostforce=on,queues=2",
			"-device", "virtio-net-pci,netdev=n0,id=net0,mq=on,vectors=6,mac=" + mac.String()}})
		if err != nil {
			return
		}
		srv, err = l2.ServeDHCP("eth0", mac)
	})
	if err != nil {
		if g != nil {
			g.Close()
			t.Logf("QEMU stderr: %s", g.Stderr())
		}
		t.Fatal(err)
	}
	qemuUp := true
	closeQEMU := func() {
		if qemuUp {
			srv.Close()
			if err := g.Close(); err != nil {
				t.Logf("QEMU: %v", err)
			}
			qemuUp = false
		}
	}
	defer closeQEMU()
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	if _, err := srv.Wait(wctx, l2.DHCPDiscover); err != nil {
		t.Fatalf("guest to pod: %v (QEMU stderr %s)", err, g.Stderr())
	}
	if _, err := srv.Wait(wctx, l2.DHCPRequest); err != nil {
		t.Fatalf("pod to guest: the OFFER sent, but %v", err)
	}
	t.Logf("DHCP both ways over the CNI's tap %.1f s after cont", time.Since(t0).Seconds())
	var st *l2.VirtioStatus
	for dl := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if st, err = l2.QueryVirtioStatus(ctx, c, "net0"); err != nil {
			t.Fatal(err)
		}
		if st.VhostStarted && st.DriverOK() || time.Now().After(dl) {
			break
		}
	}
	if !st.VhostStarted || !st.DriverOK() {
		t.Errorf("x-query-virtio-status: vhost-started %v, driver ok %v: %s", st.VhostStarted, st.DriverOK(), st.Raw)
	}
	if !workerOf(g.PID) {
		t.Errorf("no vhost-%d worker: QEMU did not start vhost-net on the tap", g.PID)
	}
	if err := cn.CheckNetworkList(ctx, list, rt); err != nil {
		t.Errorf("CHECK while QEMU holds the tap: %v", err)
	}

	closeQEMU()
	for i := range 2 {
		if err := cn.DelNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if got := linkNames(t, pod); strings.Join(got, " ") != "lo" {
		t.Errorf("pod after DEL: %v", got)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != strings.Join(before, " ") {
		t.Errorf("L1's namespace after DEL: %s, had %s", got, before)
	}
}

// workerOf says whether the kernel runs a vhost worker for pid (a task
// named vhost-PID).
func workerOf(pid int) bool {
	comms, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*/comm")
	for _, p := range comms {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == fmt.Sprintf("vhost-%d", pid) {
			return true
		}
	}
	return false
}

// addDel runs ADD, CHECK, DEL and DEL again of conf through libcni with
// the netctl binary, calling during between CHECK and DEL.
func addDel(t *testing.T, conf string, rt *libcni.RuntimeConf, during func(res *types100.Result)) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "netctl")); err != nil {
		t.Fatalf("the netctl binary: %v: run make build first", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	cn := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
	r, err := cn.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := types100.GetResult(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("ADD result %s", b)
	if err := cn.CheckNetworkList(ctx, list, rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	during(res)
	// DEL's own minute: during may take longer than ADD's (a guest's boot).
	dctx, dcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer dcancel()
	for i := range 2 {
		if err := cn.DelNetworkList(dctx, list, rt); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
}

// TestVMCNIMacvtap: on the VM's kernel (no XFRM netlink family), ADD
// makes a macvtap on a veth in L1, moves it marked into the pod as eth0;
// DEL leaves only lo in the pod and L1 as it was.
func TestVMCNIMacvtap(t *testing.T) {
	k := testenv.VM(t)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cnilow0"}, PeerName: "cnilow1"}); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cnilow0"}})
	before := linkNames(t, "")
	pod := filepath.Join(t.TempDir(), "pod")
	makeNetns(t, pod)
	conf := `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","master":"cnilow0","mac":"02:00:00:00:23:02"}]}`
	addDel(t, conf, &libcni.RuntimeConf{ContainerID: "vmtest2", NetNS: pod, IfName: "eth0"}, func(res *types100.Result) {
		l := link(t, pod, "eth0")
		if l == nil || l.Type() != "macvtap" || l.Attrs().Alias != hostnic.MacvtapAlias || l.Attrs().HardwareAddr.String() != "02:00:00:00:23:02" {
			t.Errorf("kernel %s: eth0 in the pod: %v", k.Name, l)
		}
	})
	if got := linkNames(t, pod); strings.Join(got, " ") != "lo" {
		t.Errorf("pod after DEL: %v", got)
	}
	if got := strings.Join(linkNames(t, ""), " "); got != strings.Join(before, " ") {
		t.Errorf("L1 after DEL: %s, had %s", got, before)
	}
}

// TestVMCNIVDPA: with "mgmtdev": "vduse" (a VDUSE device this test serves
// under the name netctl derives for the attachment), ADD adds the vdpa
// device, binds it to vhost_vdpa, decides backend vdpa on its features,
// and writes the NPWG device-info file the runtime named (capability
// CNIDeviceInfoFile); the result lists the device with the VDUSE
// device's MAC; CHECK passes; DEL deletes the device and the file, and a
// second DEL succeeds.
func TestVMCNIVDPA(t *testing.T) {
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		// No vdpa at all (6.1): ADD is a CNI error, code 100, saying
		// what is missing, and nothing is made.
		m.Setenv("NETCTL_RUN_DIR", m.TempDir())
		pod := filepath.Join(m.TempDir(), "pod")
		makeNetns(m.T, pod)
		bin, _ := filepath.Abs(filepath.Join("..", "bin"))
		list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","mgmtdev":"vduse"}]}`))
		if err != nil {
			m.Fatal(err)
		}
		cn := libcni.NewCNIConfigWithCacheDir([]string{bin}, m.TempDir(), nil)
		_, err = cn.AddNetworkList(context.Background(), list, &libcni.RuntimeConf{ContainerID: "vmtest3", NetNS: pod, IfName: "net1"})
		m.Logf("ADD without vdpa: %v", err)
		m.Err(err, nil, "vdpa")
		var te *types.Error
		m.Check(errors.As(err, &te) && te.Code == CodeNotAvailable, "ADD's error %v: want CNI code %d", err, CodeNotAvailable)
		ents, _ := os.ReadDir("/sys/bus/vdpa/devices")
		m.Check(len(ents) == 0, "vdpa devices after the refused ADD: %v", ents)
	})
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	pod := filepath.Join(t.TempDir(), "pod")
	makeNetns(t, pod)
	name := vdpaName("vmtest3", "net1")
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0x23, 0x03}
	dev, err := vduse.Create(vduse.Config{Name: name, MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	// Where Multus names it: the only directory the plugin writes one in
	// (DevInfoDirs); the plugin makes the directories.
	info := "/run/k8s.cni.cncf.io/devinfo/cni/netctl-vmtest3-net1.json"
	t.Cleanup(func() { os.RemoveAll("/run/k8s.cni.cncf.io") })
	conf := `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","mgmtdev":"vduse","capabilities":{"CNIDeviceInfoFile":true}}]}`
	rt := &libcni.RuntimeConf{ContainerID: "vmtest3", NetNS: pod, IfName: "net1", CapabilityArgs: map[string]any{"CNIDeviceInfoFile": info}}
	addDel(t, conf, rt, func(res *types100.Result) {
		if len(res.Interfaces) != 1 || res.Interfaces[0].Name != name || res.Interfaces[0].Mac != mac.String() {
			t.Errorf("ADD result lists %+v, want vdpa device %s with MAC %s", res.Interfaces, name, mac)
		}
		drv, err := os.Readlink("/sys/bus/vdpa/devices/" + name + "/driver")
		if err != nil || filepath.Base(drv) != "vhost_vdpa" {
			t.Errorf("%s's driver: %q, %v", name, drv, err)
		}
		b, err := os.ReadFile(info)
		if err != nil {
			t.Fatalf("device-info file: %v", err)
		}
		var di DeviceInfo
		if err := json.Unmarshal(b, &di); err != nil || di.Type != "vdpa" || di.Version != "1.1.0" || di.VDPA == nil ||
			di.VDPA.ParentDevice != name || di.VDPA.Driver != "vhost" || !strings.HasPrefix(di.VDPA.Path, "/dev/vhost-vdpa-") {
			t.Errorf("device-info %s: %v", b, err)
		} else if st, err := os.Stat(di.VDPA.Path); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("device-info path %s: %v", di.VDPA.Path, err)
		}
	})
	if _, err := os.Stat("/sys/bus/vdpa/devices/" + name); !os.IsNotExist(err) {
		t.Errorf("vdpa %s after DEL: %v (want gone)", name, err)
	}
	if _, err := os.Stat(info); !os.IsNotExist(err) {
		t.Errorf("device-info file after DEL: %v (want gone)", err)
	}
}

// TestVMCNIGuestPing: a Linux guest (L2, the VM's own kernel, a KVM guest
// of L1) started in a pod's namespace on the tap the netctl binary ADDed
// (2 queues, vhost=on): the guest's virtio-net comes up with the address
// its init gives it, the pod pings it across the tap, and QEMU reports
// vhost started; after QEMU is gone DEL leaves only lo in the pod.
func TestVMCNIGuestPing(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec")
	}
	// A nested KVM guest (L1's kvm_amd on TCG's emulated SVM): under TCG
	// inside TCG the 6.12 guest's kernel dies at boot more often than not
	// (an IRETQ in text_poke_early). The VM has 2 vCPUs for it: with one,
	// it froze for good as this guest started (two CI runs, 2026-12-02).
	accel := l2.PreferKVM(t.Logf)
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	pod := filepath.Join(t.TempDir(), "pod")
	makeNetns(t, pod)
	const mac = "52:54:00:00:23:04"
	conf := `{"cniVersion":"1.1.0","name":"nctl","plugins":[{"type":"netctl","queues":2,"backend":"vhost-net"}]}`
	addDel(t, conf, &libcni.RuntimeConf{ContainerID: "vmtest4", NetNS: pod, IfName: "eth0"}, func(res *types100.Result) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		var g *l2.Guest
		var err error
		var out []byte
		t0 := time.Now()
		inPod(t, pod, func() {
			l, lerr := netlink.LinkByName("eth0")
			if lerr != nil {
				err = lerr
				return
			}
			a, _ := netlink.ParseAddr("10.77.0.1/24")
			if err = netlink.AddrAdd(l, a); err != nil {
				return
			}
			g, _, err = l2.StartLinux(ctx, l2.Config{Vmlinuz: vmlinuz, Accel: accel, Name: "cni", IP: mac + "@10.77.0.2/24",
				NICs: []l2.NIC{{ID: "nic0", MAC: mac, Tap: "eth0", Netdev: "queues=2", Device: "mq=on,vectors=6"}}}, 1, 6*time.Minute, t.Logf)
			if err != nil {
				return
			}
			t.Logf("kernel %s: L2 (%s) up with its NIC in %.1f s", k.Name, accel, time.Since(t0).Seconds())
			// The guest's init adds its address once the NIC is up: a
			// few pings may go before it answers.
			out, err = exec.CommandContext(ctx, "/bin/busybox", "ping", "-c", "20", "-w", "60", "10.77.0.2").CombinedOutput()
		})
		if g != nil {
			defer func() {
				if cerr := g.Close(); cerr != nil {
					t.Logf("L2 QEMU: %v", cerr)
				}
				if t.Failed() {
					t.Logf("L2 QEMU stderr:\n%s\nconsole:\n%s", g.Stderr(), g.Console())
				}
			}()
		}
		t.Logf("ping from the pod:\n%s", out)
		if err != nil {
			t.Fatalf("guest on the CNI's tap: %v", err)
		}
		if m := regexp.MustCompile(`(\d+) packets received`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
			t.Errorf("no ping answered")
		}
		c, err := qmp.Dial(ctx, g.QMP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := l2.QueryVirtioStatus(ctx, c, "nic0")
		if err != nil {
			t.Fatal(err)
		}
		if !st.VhostStarted || !st.DriverOK() || !workerOf(g.PID) {
			t.Errorf("nic0: vhost-started %v, driver ok %v, vhost worker %v: %s", st.VhostStarted, st.DriverOK(), workerOf(g.PID), st.Raw)
		}
	})
	if got := linkNames(t, pod); strings.Join(got, " ") != "lo" {
		t.Errorf("pod after DEL: %v", got)
	}
}
