package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vduse"
)

// qemuFDs counts what QEMU's fds point at (l2.FDs).
func qemuFDs(t *testing.T, pid int) map[string]int {
	t.Helper()
	n, err := l2.FDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// vhostWorkers counts the vhost workers serving QEMU pid: threads named
// vhost-PID, QEMU's own on 6.4+ (vhost_task), kernel threads before.
func vhostWorkers(pid int) int {
	want := fmt.Sprintf("vhost-%d", pid)
	comms, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*/comm")
	n := 0
	for _, c := range comms {
		if b, err := os.ReadFile(c); err == nil && strings.TrimSpace(string(b)) == want {
			n++
		}
	}
	return n
}

// TestVMAttachVhostNet: in the test VM (6.12 and 6.1 both have vhost-net)
// the host's QEMU 7.2, chrooted and paused (q35, native PCIe hotplug, one
// root port), gets a 2-queue NIC from Attach with the real probe and the
// latency profile: the chain picks vhost-net, netdev_add with
// vhostforce=on and poll-us takes the fds (so
// QEMU's vhost setup on them succeeded), QEMU holds two /dev/vhost-net and
// two tun fds, and two vhost workers serve it. Detach unplugs at once and
// afterwards QEMU holds no vhost-net or tun fd, no worker is left, and no
// link or record.
func TestVMAttachVhostNet(t *testing.T) {
	k := testenv.VM(t)
	sock, pid := startChrootQEMU(t, "vmattach", false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	nic, err := Attach(ctx, Request{QMP: sock, ID: "net1", Queues: 2, Profile: "latency", StateDir: dir})
	if err != nil {
		t.Fatalf("attach on %s: %v", k.Name, err)
	}
	t.Logf("%s: backend %s, fds %v, steps %+v, props %v", k.Name, nic.Backend, nic.FDNames, nic.Steps, nic.Properties)
	if nic.BusyPollUS == 0 {
		t.Errorf("latency profile on vhost-net: no busy-poll (poll-us) in the record %+v", nic)
	}
	if nic.Backend != "vhost-net" || len(nic.FDNames) != 4 {
		t.Errorf("record: backend %s, fds %v: want vhost-net with 2 tap and 2 vhost fds", nic.Backend, nic.FDNames)
	}
	fds := qemuFDs(t, pid)
	if fds["/dev/vhost-net"] != 2 || fds["/dev/net/tun"] != 2 {
		t.Errorf("QEMU's fds %v: want 2 /dev/vhost-net and 2 /dev/net/tun", fds)
	}
	if n := vhostWorkers(pid); n != 2 {
		t.Errorf("%d vhost workers for QEMU %d, want 2", n, pid)
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "net1", StateDir: dir, Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	fds = qemuFDs(t, pid)
	if fds["/dev/vhost-net"] != 0 || fds["/dev/net/tun"] != 0 {
		t.Errorf("QEMU's fds after detach %v", fds)
	}
	deadline := time.Now().Add(5 * time.Second)
	for vhostWorkers(pid) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := vhostWorkers(pid); n != 0 {
		t.Errorf("%d vhost workers left after detach", n)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after detach: %v", l)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
}

// startChrootQEMU starts the host's QEMU 7.2 in the VM (chrooted in
// /host), paused, q35 with native PCIe hotplug and one root port (rp1),
// and returns its QMP socket as L1 sees it and its pid. With shared, its
// 256 MiB of RAM are a shared memfd (what a VDUSE device needs).
func startChrootQEMU(t *testing.T, name string, shared bool) (string, int) {
	t.Helper()
	q := l2.StartChrootQEMUForTest(t, l2.ChrootQEMU{Name: name, NativeHotplug: true, SharedRAM: shared})
	return q.Sock, q.PID
}

// TestVMAttachVDPAFromMgmtdev: on 6.12, Attach --mgmtdev vduse creates the
// vdpa device on a VDUSE device (test/vduse), binds it to vhost_vdpa,
// re-probes, picks vDPA and hands QEMU the /dev/vhost-vdpa-N fd with
// netdev_add type=vhost-vdpa,vhostfd=...; QEMU holds that fd. Detach
// unplugs, QEMU closes it, and the vdpa device netctl created is deleted.
// On 6.1 (no vdpa) the same request fails at vdpa dev add, saying vdpa is
// missing, and leaves nothing.
func TestVMAttachVDPAFromMgmtdev(t *testing.T) {
	testenv.Require(t, "vduse", func(m *testenv.Missing) {
		sock, _ := startChrootQEMU(t, "vmvdpa", true)
		dir := m.TempDir()
		_, err := Attach(context.Background(), Request{QMP: sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
		m.Err(err, ErrNotAvailable, "create vdpa device on vduse", "vdpa")
		m.Check(len(records(m.T, dir)) == 0, "a record was left")
	})
	dev, err := vduse.Create(vduse.Config{Name: "netctl-v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// QEMU's default private RAM: the VDUSE device would move nothing
	// (test/l2's TestVMFirmwareVDPA shows it), so attach refuses, saying
	// how to start QEMU, and deletes the device it created.
	private, ppid := startChrootQEMU(t, "vmvdpapriv", false)
	_, err = Attach(ctx, Request{QMP: private, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "share=on") {
		t.Errorf("attach of a VDUSE device to a VM with private RAM: %v", err)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-v1"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-v1 after the refusal: %v (want it deleted)", err)
	}
	for f := range qemuFDs(t, ppid) {
		if strings.HasPrefix(f, "/dev/vhost-vdpa") {
			t.Errorf("QEMU holds %s after the refusal", f)
		}
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after the refusal: %v", r)
	}
	sock, pid := startChrootQEMU(t, "vmvdpa", true)
	nic, err := Attach(ctx, Request{QMP: sock, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backend %s, vdpa %+v, fds %v, steps %+v, props %v", nic.Backend, nic.VDPA, nic.FDNames, nic.Steps, nic.Properties)
	if nic.Backend != "vdpa" || nic.VDPA == nil || !nic.VDPA.Created || nic.VDPA.Name != "netctl-v1" {
		t.Fatalf("record %+v", nic)
	}
	if fds := qemuFDs(t, pid); fds[nic.VDPA.Vhost] != 1 {
		t.Errorf("QEMU's fds %v: want %s once", fds, nic.VDPA.Vhost)
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "v1", StateDir: dir, Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if fds := qemuFDs(t, pid); fds[nic.VDPA.Vhost] != 0 {
		t.Errorf("QEMU's fds after detach %v", fds)
	}
	if _, err := os.Stat("/sys/bus/vdpa/devices/netctl-v1"); !os.IsNotExist(err) {
		t.Errorf("vdpa device netctl-v1 after detach: %v (want it deleted)", err)
	}
	if r := records(t, dir); len(r) != 0 {
		t.Errorf("records after detach: %v", r)
	}
}
