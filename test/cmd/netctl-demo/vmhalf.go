package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
)

// vmConfig is the VM half, run inside the 6.12 test VM (L1), which has
// kernel vhost-net: a nested firmware-only QEMU gets a NIC on it.
type vmConfig struct {
	Netctl string // netctl as L1 sees it (/host/.../bin/netctl)
	MAC    string
	RunDir string // netctl's NETCTL_RUN_DIR; "" is /run/netctl (the VM's own)
}

type vmHalf struct {
	cfg  vmConfig
	n    *narrator
	undo undoStack
	fw   *l2.Guest
	c    *qmp.Client // the nested QEMU's first monitor; netctl uses the second
	tap  string
	dhcp *l2.DHCPServer
}

func runVMHalf(ctx context.Context, n *narrator, cfg vmConfig) (err error) {
	v := &vmHalf{cfg: cfg, n: n}
	defer func() {
		if err != nil {
			n.note("the VM half failed: undoing what it did")
		}
		if uerr := v.undo.run(); uerr != nil {
			n.note("%v", uerr)
			err = errors.Join(err, uerr)
		}
	}()
	for _, step := range []func(context.Context) error{v.start, v.attach, v.traffic, v.inspect, v.detach} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (v *vmHalf) netctl(args ...string) command {
	c := command{Show: "netctl " + strings.Join(args, " "), Argv: append([]string{v.cfg.Netctl}, args...)}
	if v.cfg.RunDir != "" {
		c.Env = []string{"NETCTL_RUN_DIR=" + v.cfg.RunDir}
	}
	return c
}

func (v *vmHalf) start(ctx context.Context) error {
	v.n.heading("Inside the test VM: its kernel has vhost-net")
	if _, err := v.n.run(ctx, sh("uname", "-r")); err != nil {
		return err
	}
	if _, err := v.n.run(ctx, sh("ls", "-l", "/dev/vhost-net")); err != nil {
		return err
	}
	v.n.note("a nested QEMU 7.2 (TCG) with no OS: paused (-S), booting from the network (-boot n), two QMP monitors;")
	v.n.note("the demo keeps the first (cont, system_reset), netctl uses the second. The demo starts it:")
	fw, err := l2.StartFirmware(ctx, l2.Firmware{Name: "demo", SecondMonitor: true})
	if err != nil {
		return err
	}
	v.fw = fw
	v.undo.push("the nested QEMU", func() error {
		v.n.note("stopping the nested QEMU")
		return fw.Close()
	})
	v.n.shown("$", "chroot "+l2.Root+" "+strings.Join(fw.Args, " ")+" &", "")
	if v.c, err = qmp.Dial(ctx, fw.QMP); err != nil {
		return err
	}
	v.undo.push("the QMP connection", v.c.Close)
	return nil
}

func (v *vmHalf) attach(ctx context.Context) error {
	v.n.heading("netctl attach (backend auto): vhost-net this time")
	if _, err := v.n.run(ctx, v.netctl("attach", "--qmp", v.fw.QMP2, "--id", "net1", "--mac", v.cfg.MAC)); err != nil {
		return err
	}
	v.undo.push("the NIC", func() error {
		if rec, _ := record(context.Background(), v.cfg.RunDir); rec == nil {
			return nil
		}
		// At the firmware stage no OS answers device_del: a reset completes it.
		v.c.Execute(context.Background(), "device_del", map[string]string{"id": "net1"})
		v.c.Execute(context.Background(), "system_reset", nil)
		_, err := v.n.run(context.Background(), v.netctl("detach", "--qmp", v.fw.QMP2, "--id", "net1", "--timeout", "10s"))
		return err
	})
	rec, err := record(ctx, v.cfg.RunDir)
	if err != nil {
		return err
	}
	if rec == nil || rec.Tap == nil {
		return fmt.Errorf("netctl attach succeeded, yet there is no record of net1 with a tap")
	}
	if rec.Backend != "vhost-net" {
		return fmt.Errorf("netctl attach chose %s in a VM that has /dev/vhost-net", rec.Backend)
	}
	v.tap = rec.Tap.Name
	pipe := fmt.Sprintf("ls -l /proc/%d/fd | grep vhost-net", v.fw.PID)
	if _, err := v.n.run(ctx, command{Show: pipe, Argv: []string{"sh", "-c", pipe}}); err != nil {
		return fmt.Errorf("the nested QEMU holds no /dev/vhost-net fd after attach: %w", err)
	}
	v.n.note("netctl opened /dev/vhost-net and the tap and passed them to QEMU (pid %d) over QMP (getfd)", v.fw.PID)
	return nil
}

// record is netctl's record of net1 in dir ("" is /run/netctl), or nil.
func record(ctx context.Context, dir string) (*attach.Listed, error) {
	ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir})
	if err != nil {
		return nil, err
	}
	for i := range ls {
		if ls[i].ID == "net1" {
			return &ls[i], nil
		}
	}
	return nil, nil
}

func (v *vmHalf) traffic(ctx context.Context) error {
	v.n.heading("Frames cross vhost-net: the firmware's DHCP, answered on the tap")
	mac, err := net.ParseMAC(v.cfg.MAC)
	if err != nil {
		return err
	}
	served := time.Now() // the server's events count from about here
	if v.dhcp, err = l2.ServeDHCP(v.tap, mac); err != nil {
		return err
	}
	v.undo.push("the DHCP server", v.dhcp.Close)
	v.n.note("a test DHCP server listens on %s (a packet socket) for %s and offers %v", v.tap, mac, l2.DHCPOfferIP)
	v.n.note("cont: SeaBIOS runs the NIC's option ROM (iPXE), whose virtio-net driver sends DHCP")
	t0 := time.Now()
	if err := qmpShow(ctx, v.n, v.c, "cont"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 75*time.Second)
	defer cancel()
	if _, err := v.dhcp.Wait(wctx, l2.DHCPRequest); err != nil {
		return fmt.Errorf("iPXE's DHCP: %w (seen: %v)", err, v.dhcp.Log())
	}
	for _, e := range v.dhcp.Log() {
		dir := "guest -> host"
		if e.Type == l2.DHCPOffer || e.Type == l2.DHCPAck {
			dir = "host -> guest"
		}
		v.n.shown("  dhcp:", fmt.Sprintf("%-12v %s  %5.1f s after cont, xid %#x", e.Type, dir, (e.At-t0.Sub(served)).Seconds(), e.XID), "")
	}
	v.n.note("iPXE sent DHCPREQUEST for the offered address: the DHCPOFFER reached it, so frames crossed both ways")
	return nil
}

func (v *vmHalf) inspect(ctx context.Context) error {
	v.n.heading("netctl diagnose: vhost started; netctl list")
	dl := time.Now().Add(15 * time.Second)
	for {
		st, err := l2.QueryVirtioStatus(ctx, v.c, "net1")
		if err != nil {
			return err
		}
		if st.VhostStarted && st.DriverOK() {
			break
		}
		if time.Now().After(dl) {
			return fmt.Errorf("QEMU does not report vhost started with DRIVER_OK: %s", st.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := v.n.runWant(ctx, v.netctl("diagnose", "--qmp", v.fw.QMP2, "--id", "net1"), "vhost-net moves the packets", "netctl diagnose does not say vhost-net moves the packets"); err != nil {
		return err
	}
	if _, err := v.n.runWant(ctx, v.netctl("list"), "vhost-net", "netctl list does not show net1 on vhost-net"); err != nil {
		return err
	}
	return nil
}

func (v *vmHalf) detach(ctx context.Context) error {
	v.n.heading("netctl detach: only firmware runs, and firmware never answers an unplug")
	_, err := v.n.run(ctx, v.netctl("detach", "--qmp", v.fw.QMP2, "--id", "net1", "--timeout", "5s"))
	if exitCode(err) != 1 {
		return fmt.Errorf("netctl detach at the firmware stage: %v, want a timeout (exit 1)", err)
	}
	if _, err := v.n.runWant(ctx, v.netctl("list"), "detach-timeout", "netctl list does not mark net1 detach-timeout"); err != nil {
		return err
	}
	v.n.note("a guest OS would release the NIC; here a reset does it (the unplug QEMU holds pending completes),")
	v.n.note("then netctl detach finishes: netdev_del, and the tap it created goes with QEMU's fds")
	if err := qmpShow(ctx, v.n, v.c, "system_reset"); err != nil {
		return err
	}
	if _, err := v.n.run(ctx, v.netctl("detach", "--qmp", v.fw.QMP2, "--id", "net1")); err != nil {
		return err
	}
	v.n.note("nothing is left: not in QEMU, not in netctl's records, not in the kernel")
	if err := qemuNothingLeft(ctx, v.n, v.c, "net1"); err != nil {
		return err
	}
	if _, err := v.n.runWant(ctx, v.netctl("list"), "no NICs attached by netctl", "netctl list after detach still lists NICs"); err != nil {
		return err
	}
	v.dhcp.Close()
	if _, err := v.n.run(ctx, sh("ip", "link", "show", v.tap)); err == nil {
		return fmt.Errorf("the tap %s is still there after detach", v.tap)
	}
	if holds(v.fw.PID, "/dev/vhost-net") {
		return fmt.Errorf("the nested QEMU still holds /dev/vhost-net after detach")
	}
	v.n.note("(the tap is gone, as the error above says) and QEMU (pid %d) holds no /dev/vhost-net fd", v.fw.PID)
	return nil
}

// holds says whether process pid has an fd open on path.
func holds(pid int, path string) bool {
	fds, _ := l2.FDs(pid)
	return fds[path] > 0
}
