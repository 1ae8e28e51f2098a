package attach

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
)

// qemuFDs counts what QEMU's fds point at (readlink of /proc/PID/fd/*).
func qemuFDs(t *testing.T, pid int) map[string]int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range es {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			n[l]++
		}
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
// root port), gets a 2-queue NIC from Attach with the real probe: the
// chain picks vhost-net, netdev_add with vhostforce=on takes the fds (so
// QEMU's vhost setup on them succeeded), QEMU holds two /dev/vhost-net and
// two tun fds, and two vhost workers serve it. Detach unplugs at once and
// afterwards QEMU holds no vhost-net or tun fd, no worker is left, and no
// link or record.
func TestVMAttachVhostNet(t *testing.T) {
	k := testenv.VM(t)
	if err := l2.Chroot(); err != nil {
		t.Fatal(err)
	}
	sock := "/run/l2/attach.sock"
	os.Remove(l2.Root + sock)
	cmd := exec.Command("chroot", l2.Root, "/usr/bin/qemu-system-x86_64", "-S", "-nodefaults", "-display", "none",
		"-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
		"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1", "-name", "vmattach", "-qmp", "unix:"+sock+",server=on,wait=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("QEMU's stderr: %s", stderr.String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pid int
	for {
		c, err := qmp.Dial(ctx, l2.Root+sock)
		if err == nil {
			pid, err = c.PeerPID()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("QEMU's QMP socket never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dir := t.TempDir()
	nic, err := Attach(ctx, Request{QMP: l2.Root + sock, ID: "net1", Queues: 2, StateDir: dir, ExtraProps: map[string]any{"bus": "rp1"}})
	if err != nil {
		t.Fatalf("attach on %s: %v", k.Name, err)
	}
	t.Logf("%s: backend %s, fds %v, steps %+v, props %v", k.Name, nic.Backend, nic.FDNames, nic.Steps, nic.Properties)
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
	if err := Detach(ctx, DetachRequest{QMP: l2.Root + sock, ID: "net1", StateDir: dir, Timeout: 20 * time.Second}); err != nil {
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
