package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/netctl/netctl/test/bench/l2guest"
	"github.com/netctl/netctl/test/l2"
)

// benchDir is the nested guest's work directory as QEMU (chrooted in
// l2.Root) sees it.
const benchDir = "/run/l2bench"

// nestedGuest is a nested Linux guest (test/l2's kernel and modules) with
// l2agent in its initramfs, started paused (-S) with one NIC QEMU sets up
// itself (-netdev tap,vhost=on); the bench attaches the other with netctl
// and then lets it run. The nestedGuest owns the QEMU process; QEMU owns
// its tap and vhost fds.
type nestedGuest struct {
	QMP    string // as this process sees it
	Serial string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

// bootNested writes the guest's vmlinux and initramfs and starts QEMU
// paused, with QEMU's own NIC (mac ..:02) on tap qemuTap.
func bootNested(ctx context.Context, vmlinuz, agentBin, qemuTap string) (*nestedGuest, error) {
	if err := l2.Chroot(); err != nil {
		return nil, err
	}
	dir := l2.Root + benchDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := l2guest.WriteFiles(ctx, vmlinuz, agentBin, l2guest.Init(netctlGuest+"/24", qemuGuest+"/24"), dir); err != nil {
		return nil, err
	}
	g := &nestedGuest{QMP: dir + "/qmp.sock", Serial: dir + "/serial.log", done: make(chan struct{})}
	os.Remove(g.QMP)
	os.Remove(g.Serial)
	args := []string{l2.QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-S",
		"-machine", "pc", "-accel", "tcg", "-cpu", "max,erms=off", "-m", "512", "-smp", "1",
		"-kernel", benchDir + "/vmlinux", "-initrd", benchDir + "/initrd.gz",
		"-append", "console=ttyS0 quiet panic=-1 mitigations=off " + l2.BootTrims,
		"-serial", "file:" + benchDir + "/serial.log",
		"-qmp", "unix:" + benchDir + "/qmp.sock,server=on,wait=off",
		"-netdev", "tap,id=qemunet,ifname=" + qemuTap + ",script=no,downscript=no,vhost=on",
		"-device", "virtio-net-pci,netdev=qemunet,id=qemunic,mac=" + qemuMAC}
	g.cmd = exec.Command("chroot", append([]string{l2.Root}, args...)...)
	g.cmd.Stderr = &g.stderr
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the nested guest's QEMU: %w", err)
	}
	go func() { g.cmd.Wait(); close(g.done) }()
	if err := g.wait(ctx, 30*time.Second, func() bool { _, err := os.Stat(g.QMP); return err == nil }); err != nil {
		g.Close()
		return nil, fmt.Errorf("the nested guest's QMP socket: %w", err)
	}
	return g, nil
}

// wait polls ok every 200 ms until it holds, QEMU exits or timeout.
func (g *nestedGuest) wait(ctx context.Context, timeout time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-g.done:
			return fmt.Errorf("QEMU exited: %s", g.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("not within %v", timeout)
		case <-tick.C:
		}
	}
	return nil
}

// Console is the guest's serial log so far.
func (g *nestedGuest) Console() string {
	b, _ := os.ReadFile(g.Serial)
	return string(b)
}

// Close kills QEMU and waits for it.
func (g *nestedGuest) Close() {
	g.cmd.Process.Kill()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
}
