package main

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vm"
)

// l2Init is the nested guest's /init.
//
//go:embed l2init.sh
var l2Init []byte

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
	if err := writeNestedFiles(ctx, vmlinuz, agentBin, dir); err != nil {
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

// writeNestedFiles writes vmlinux (from vmlinuz's compressed payload) and
// initrd.gz (busybox, the virtio-net modules of the test VM, l2agent and
// l2init.sh) into dir.
func writeNestedFiles(ctx context.Context, vmlinuz, agentBin, dir string) error {
	bz, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	p, kind, err := l2.Payload(bz)
	if err != nil {
		return fmt.Errorf("%s: %w", vmlinuz, err)
	}
	tool := map[string]string{l2.Zstd: "/usr/bin/zstd", l2.XZ: "/usr/bin/xz", l2.Gzip: "/usr/bin/gzip"}[kind]
	elf, err := l2.Host(ctx, p, tool, "-dc")
	if err != nil {
		return fmt.Errorf("decompress %s: %w", vmlinuz, err)
	}
	if err := os.WriteFile(dir+"/vmlinux", elf, 0o644); err != nil {
		return err
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	c := vm.NewCPIO(gz)
	for _, d := range []string{"bin", "dev", "proc", "sys", "mods"} {
		c.Dir(d)
	}
	c.CharDev("dev/console", 5, 1)
	c.File("init", 0o755, l2Init)
	c.File("bin/busybox", 0o755, busybox)
	c.File("bin/l2agent", 0o755, agent)
	var order []string
	for _, m := range l2.Modules {
		b, err := os.ReadFile("/mods/" + m + ".ko")
		if errors.Is(err, os.ErrNotExist) && l2.Optional[m] {
			continue // built in
		}
		if err != nil {
			return fmt.Errorf("the test VM's initramfs has no %s module: %w", m, err)
		}
		c.File("mods/"+m+".ko", 0o644, b)
		order = append(order, m)
	}
	c.File("mods/order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(dir+"/initrd.gz", buf.Bytes(), 0o644)
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
