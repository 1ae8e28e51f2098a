package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/guest"
)

// hostConfig is the host half: a real QEMU guest on this host.
type hostConfig struct {
	Netctl  string // bin/netctl
	Busybox string // a static busybox (this machine's ping)
	Netns   string // the demo's network namespace: created, used, removed
	VMName  string // QEMU's -name, which netctl attach --vm finds
	MAC     string // the NIC's MAC in the guest
	HostIP  string // the tap's address (CIDR), inside Netns only
	GuestIP string // the guest's address (CIDR)
}

func defaultHostConfig() hostConfig {
	return hostConfig{Netns: "netctl-demo", VMName: "netctl-demo", MAC: "52:54:00:de:00:02",
		HostIP: "10.77.0.1/24", GuestIP: "10.77.0.2/24"}
}

// hostHalf runs the host half on the calling goroutine, which it locks
// to its thread for the time it runs: the thread joins the demo's
// namespace, so that QEMU and every command the demo starts live there.
// It leaves nothing behind, on success or failure: the guest powered
// off, netctl's records, the namespace (and with it the tap) removed.
type hostHalf struct {
	cfg   hostConfig
	n     *narrator
	undo  undoStack
	run   string // NETCTL_RUN_DIR
	g     *guest.Guest
	tap   string
	guest string // the NIC's name in the guest
	qemu  int    // QEMU's pid, from netctl's record
	// inNetns: the locked thread is in the demo's namespace.
	inNetns bool
}

func runHostHalf(ctx context.Context, n *narrator, cfg hostConfig) (err error) {
	h := &hostHalf{cfg: cfg, n: n}
	runtime.LockOSThread()
	defer func() {
		if err != nil {
			n.note("the host half failed: undoing what it did")
		}
		if uerr := h.undo.run(); uerr != nil {
			n.note("%v", uerr)
			err = errors.Join(err, uerr)
		}
		if !h.inNetns {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
	}()
	for _, step := range []func(context.Context) error{h.boot, h.attach, h.traffic, h.inspect, h.detach, h.teardown} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// netctl is a netctl command run in the demo's namespace with the demo's
// state directory.
func (h *hostHalf) netctl(args ...string) command {
	return command{
		Show: "ip netns exec " + h.cfg.Netns + " netctl " + strings.Join(args, " "),
		Argv: append([]string{"ip", "netns", "exec", h.cfg.Netns, h.cfg.Netctl}, args...),
		Env:  []string{"NETCTL_RUN_DIR=" + h.run},
	}
}

// sh is a command shown as typed.
func sh(args ...string) command { return command{Show: strings.Join(args, " "), Argv: args} }

func (h *hostHalf) boot(ctx context.Context) error {
	ns := h.cfg.Netns
	h.n.heading("A real QEMU guest on this host, in a network namespace of its own")
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
		return fmt.Errorf("a network namespace %s exists already (a demo that was killed?): remove it with 'ip netns del %s' and run the demo again", ns, ns)
	}
	if _, err := h.n.run(ctx, sh("ip", "netns", "add", ns)); err != nil {
		return err
	}
	h.undo.push("the namespace", func() error {
		_, err := h.n.run(context.Background(), sh("ip", "netns", "del", ns))
		return err
	})
	if _, err := h.n.run(ctx, sh("ip", "-n", ns, "link", "set", "lo", "up")); err != nil {
		return err
	}
	if err := h.enterNetns(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "netctl-demo-run-")
	if err != nil {
		return err
	}
	h.run = dir
	h.undo.push("netctl's state directory", func() error {
		h.n.shown("$", "rm -r "+dir, "")
		return os.RemoveAll(dir)
	})
	h.n.shown("$", "export NETCTL_RUN_DIR="+dir, "")
	h.n.note("(netctl keeps its records there instead of /run/netctl, so the demo's are its own)")

	h.n.note("QEMU 7.2 (TCG) boots Debian's 6.12 kernel with a busybox initramfs and a command agent (test/guest),")
	h.n.note("machine pc, -name %s, a QMP socket, no NIC; the demo starts it in %s", h.cfg.VMName, ns)
	h.n.note("(the boot waits while tests hold both of the machine's VM slots)")
	t0 := time.Now()
	g, err := guest.Boot(ctx, guest.Options{QEMUArgs: []string{"-name", h.cfg.VMName}})
	if err != nil {
		return err
	}
	h.g = g
	h.undo.push("the guest", func() error {
		h.n.note("powering the guest off (QEMU exits)")
		return g.Close()
	})
	h.n.note("booted in %.1f s", time.Since(t0).Seconds())
	if _, err := h.guestRun(ctx, "uname -r; ls /sys/class/net"); err != nil {
		return err
	}
	if _, err := h.n.runWant(ctx, h.netctl("vm", "list", h.cfg.VMName), g.QMP(), fmt.Sprintf("netctl vm list does not show the guest's QMP socket %s", g.QMP())); err != nil {
		return err
	}
	return nil
}

// enterNetns moves this (locked) thread into the demo's namespace; its
// undo moves it back.
func (h *hostHalf) enterNetns() error {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	ns, err := os.Open(filepath.Join("/run/netns", h.cfg.Netns))
	if err != nil {
		orig.Close()
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		orig.Close()
		return fmt.Errorf("setns %s: %w", h.cfg.Netns, err)
	}
	h.inNetns = true
	h.undo.push("the thread's network namespace", func() error {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			return err // orig stays open: the thread stays locked and ends with its goroutine
		}
		h.inNetns = false
		return orig.Close()
	})
	return nil
}

// guestRun runs cmd in the guest, shows it and its output, and fails on
// a non-zero status.
func (h *hostHalf) guestRun(ctx context.Context, cmd string) (string, error) {
	out, rc, err := h.g.Exec(ctx, cmd)
	if err != nil {
		return "", err
	}
	h.n.shown("guest#", cmd, out)
	if rc != 0 {
		return out, fmt.Errorf("guest: %s: exit status %d", cmd, rc)
	}
	return out, nil
}

func (h *hostHalf) attach(ctx context.Context) error {
	_, statErr := os.Stat("/dev/vhost-net")
	if statErr != nil {
		h.n.heading("netctl attach: no vhost-net on this host, so the NIC falls back to QEMU's userspace virtio-net")
		h.n.run(ctx, sh("ls", "-l", "/dev/vhost-net")) // fails: that is the point
	} else {
		h.n.heading("netctl attach: this host has /dev/vhost-net, so the NIC gets the kernel's data path")
	}
	if _, err := h.n.run(ctx, h.netctl("attach", "--vm", h.cfg.VMName, "--id", "net1", "--mac", h.cfg.MAC)); err != nil {
		return err
	}
	h.undo.push("the NIC", func() error {
		// Only on failure: the success path detaches (and the record is
		// gone then). QEMU's exit takes the tap with it either way.
		if rec, _ := h.record(context.Background()); rec == nil {
			return nil
		}
		_, err := h.n.run(context.Background(), h.netctl("detach", "--vm", h.cfg.VMName, "--id", "net1", "--timeout", "10s"))
		return err
	})
	rec, err := h.record(ctx)
	if err != nil {
		return err
	}
	if rec == nil || rec.Tap == nil {
		return fmt.Errorf("netctl attach succeeded, yet netctl list has no record of net1 with a tap")
	}
	if statErr != nil && rec.Backend != "userspace" {
		return fmt.Errorf("netctl attach chose %s on a host without /dev/vhost-net", rec.Backend)
	}
	h.tap, h.qemu = rec.Tap.Name, rec.QEMUPID
	// A tun fd's fdinfo names its interface (iff:). Its /proc/PID/fd
	// link does not always read /dev/net/tun: netctl opened it in the
	// mount namespace ip netns exec made, and from outside that namespace
	// the link reads /net/tun.
	// grep's status is not the verdict: an fd QEMU closes while grep
	// reads the directory makes it exit 2 (seen under load); holdsTap,
	// which reads each fdinfo itself, decides.
	pipe := fmt.Sprintf("grep -Hs iff: /proc/%d/fdinfo/*", h.qemu)
	_, gerr := h.n.run(ctx, command{Show: pipe, Argv: []string{"sh", "-c", pipe}})
	if !holdsTap(h.qemu, h.tap) {
		return fmt.Errorf("QEMU holds no fd of the tap %s after attach (grep: %v)", h.tap, gerr)
	}
	h.n.note("netctl created the tap %s and passed its queue fd to QEMU (pid %d) over QMP (getfd)", h.tap, h.qemu)
	_, err = h.n.run(ctx, sh("ip", "-n", h.cfg.Netns, "addr", "add", h.cfg.HostIP, "dev", h.tap))
	return err
}

// record is netctl's record of net1, or nil.
func (h *hostHalf) record(ctx context.Context) (*attach.Listed, error) { return record(ctx, h.run) }

func (h *hostHalf) traffic(ctx context.Context) error {
	h.n.heading("The guest finds the hotplugged NIC; pings cross it both ways")
	mac, err := net.ParseMAC(h.cfg.MAC)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if h.guest, err = h.g.WaitNIC(ctx, mac); err != nil {
		return err
	}
	h.n.note("the guest's kernel took the hotplug (ACPI, then virtio_net): %s has %s, %.1f s after attach returned", h.guest, h.cfg.MAC, time.Since(t0).Seconds())
	if _, err := h.guestRun(ctx, fmt.Sprintf("ip link set %s up && ip addr add %s dev %s && ip addr show %s", h.guest, h.cfg.GuestIP, h.guest, h.guest)); err != nil {
		return err
	}
	hostAddr, guestAddr := strings.Split(h.cfg.HostIP, "/")[0], strings.Split(h.cfg.GuestIP, "/")[0]
	out, err := h.guestRun(ctx, "ping -c 3 -i 0.2 -W 5 "+hostAddr)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "3 packets transmitted, 3 packets received") {
		return fmt.Errorf("guest to host: not every ping was answered")
	}
	c := command{Show: "ip netns exec " + h.cfg.Netns + " busybox ping -c 3 -i 0.2 -W 5 " + guestAddr,
		Argv: []string{"ip", "netns", "exec", h.cfg.Netns, h.cfg.Busybox, "ping", "-c", "3", "-i", "0.2", "-W", "5", guestAddr}}
	if _, err := h.n.runWant(ctx, c, "3 packets transmitted, 3 packets received", "host to guest: not every ping was answered"); err != nil {
		return err
	}
	return nil
}

func (h *hostHalf) inspect(ctx context.Context) error {
	h.n.heading("netctl diagnose, netctl list and netctl stats")
	out, err := h.n.run(ctx, h.netctl("diagnose", "--qmp", h.g.QMP(), "--id", "net1"))
	if err != nil {
		return err
	}
	word, err := h.g.Features(ctx, h.guest)
	if err != nil {
		return err
	}
	hex := fmt.Sprintf("%#x", word)
	if !strings.Contains(out, hex) {
		return fmt.Errorf("netctl diagnose does not show the guest driver's feature word %s (/sys/class/net/%s/device/features)", hex, h.guest)
	}
	h.n.note("the guest's own driver acknowledged %s (/sys/class/net/%s/device/features): diagnose read the same from QEMU", hex, h.guest)
	if _, err := h.n.runWant(ctx, h.netctl("list"), "net1", "netctl list does not show net1"); err != nil {
		return err
	}
	// Rates per queue pair over one second: the link, and the rings read
	// in QEMU's memory (QEMU serves this NIC itself here).
	if _, err := h.n.runWant(ctx, h.netctl("stats", "--vm", h.cfg.VMName, "--interval", "1s"), "/net1 ", "netctl stats does not show net1"); err != nil {
		return err
	}
	return nil
}

func (h *hostHalf) detach(ctx context.Context) error {
	h.n.heading("netctl detach: device_del, the guest releases the NIC (DEVICE_DELETED), netdev_del, the tap goes")
	t0 := time.Now()
	if _, err := h.n.run(ctx, h.netctl("detach", "--vm", h.cfg.VMName, "--id", "net1")); err != nil {
		return err
	}
	h.n.note("detach took %.1f s", time.Since(t0).Seconds())
	h.n.note("nothing is left: not in the guest, not in QEMU, not in netctl's records, not on the host")
	out, err := h.guestRun(ctx, "ls /sys/class/net")
	if err != nil {
		return err
	}
	if strings.Contains(out, h.guest) {
		return fmt.Errorf("the guest still has %s", h.guest)
	}
	c, err := qmp.Dial(ctx, h.g.QMP())
	if err != nil {
		return err
	}
	err = qemuNothingLeft(ctx, h.n, c, "net1")
	c.Close() // QEMU serves one client per monitor
	if err != nil {
		return err
	}
	if _, err := h.n.runWant(ctx, h.netctl("list"), "no NICs attached by netctl", "netctl list after detach still lists NICs"); err != nil {
		return err
	}
	if out, err = h.n.run(ctx, sh("ip", "-n", h.cfg.Netns, "link", "show")); err != nil {
		return err
	}
	if strings.Contains(out, h.tap) {
		return fmt.Errorf("the tap %s is still there after detach", h.tap)
	}
	if holdsTap(h.qemu, h.tap) {
		return fmt.Errorf("QEMU (pid %d) still holds an fd of the tap %s after detach", h.qemu, h.tap)
	}
	h.n.note("(only lo: the tap is gone) and QEMU (pid %d) holds no fd of it (no iff: %s in its fdinfo)", h.qemu, h.tap)
	return nil
}

func (h *hostHalf) teardown(ctx context.Context) error {
	h.n.heading("The demo powers the guest off and removes its namespace")
	if err := h.undo.run(); err != nil {
		return err
	}
	out, err := h.n.run(ctx, sh("ip", "netns", "list"))
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == h.cfg.Netns {
			return fmt.Errorf("the namespace %s is still there", h.cfg.Netns)
		}
	}
	h.n.note("(no %s: the namespace, and everything in it, is gone)", h.cfg.Netns)
	return nil
}

// holdsTap says whether process pid has an fd of the tun/tap interface
// ifname open (its fdinfo has "iff:\tIFNAME").
func holdsTap(pid int, ifname string) bool {
	infos, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
	for _, p := range infos {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && k == "iff" && strings.TrimSpace(v) == ifname {
				return true
			}
		}
	}
	return false
}
