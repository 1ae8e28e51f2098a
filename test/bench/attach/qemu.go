package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/netctl/netctl/qmp"
)

// pausedQEMU is a QEMU without a guest, stopped before its firmware (-S):
// a q35 machine with rootPorts pcie-root-ports under native PCIe hotplug
// (ACPI hotplug off), so a device_del completes at once. It has two QMP
// monitors: Sock for the attach being measured, and one the bench holds
// (ctl) to undo the minimal program's attach and to check QEMU's state.
// The pausedQEMU owns the QEMU process; QEMU owns the fds it was given.
type pausedQEMU struct {
	Name  string
	Sock  string // the monitor netctl and attach-c dial, as this process sees it
	Ports []string
	ctl   *qmp.Client
	cmd   *exec.Cmd
	err   bytes.Buffer
}

// startQEMU starts the QEMU; root is "" on the host, or the directory the
// host's / is in when QEMU runs through chroot (in the test VM), with dir
// the work directory as the chrooted QEMU sees it.
func startQEMU(ctx context.Context, root, dir, name string, rootPorts int) (*pausedQEMU, error) {
	q := &pausedQEMU{Name: name, Sock: filepath.Join(root+dir, name+".qmp")}
	ctlSock := filepath.Join(root+dir, name+"-ctl.qmp")
	os.Remove(q.Sock)
	os.Remove(ctlSock)
	args := []string{"/usr/bin/qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none", "-S",
		"-name", name, "-machine", "q35", "-accel", "tcg", "-m", "128",
		"-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
		"-qmp", "unix:" + filepath.Join(dir, name+".qmp") + ",server=on,wait=off",
		"-qmp", "unix:" + filepath.Join(dir, name+"-ctl.qmp") + ",server=on,wait=off"}
	// Root ports fill slots 2.. of pcie.0, eight functions per slot (the
	// bus has too few slots for one port each).
	for i := 0; i < rootPorts; i++ {
		id := fmt.Sprintf("rp%d", i)
		dev := fmt.Sprintf("pcie-root-port,id=%s,bus=pcie.0,chassis=%d,slot=%d,addr=0x%x.0x%x", id, i+1, i+1, 2+i/8, i%8)
		if i%8 == 0 {
			dev += ",multifunction=on"
		}
		args = append(args, "-device", dev)
		q.Ports = append(q.Ports, id)
	}
	if root == "" {
		q.cmd = exec.Command(args[0], args[1:]...)
	} else {
		q.cmd = exec.Command("chroot", append([]string{root}, args...)...)
	}
	q.cmd.Stderr = &q.err
	if err := q.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start QEMU %s: %w", name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := qmp.Dial(ctx, ctlSock)
		if err == nil {
			q.ctl = c
			return q, nil
		}
		if time.Now().After(deadline) || q.cmd.ProcessState != nil {
			q.Close()
			return nil, fmt.Errorf("QEMU %s: its QMP monitor did not answer: %w: %s", name, err, q.err.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// devices lists QEMU's user-created devices (ids under /machine/peripheral).
func (q *pausedQEMU) devices(ctx context.Context) (map[string]bool, error) {
	var props []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	if err := q.ctl.Run(ctx, "qom-list", map[string]any{"path": "/machine/peripheral"}, &props); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, p := range props {
		if strings.HasPrefix(p.Type, "child<") {
			ids[p.Name] = true
		}
	}
	return ids, nil
}

// unplug removes device id and netdev netdev the minimal program added:
// device_del, wait until the device is gone (native PCIe hotplug on a
// paused machine completes at once), netdev_del.
func (q *pausedQEMU) unplug(ctx context.Context, id, netdev string) error {
	if err := q.ctl.Run(ctx, "device_del", map[string]any{"id": id}, nil); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		ids, err := q.devices(ctx)
		if err != nil {
			return err
		}
		if !ids[id] {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("QEMU %s: device %s still there 10 s after device_del", q.Name, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return q.ctl.Run(ctx, "netdev_del", map[string]any{"id": netdev}, nil)
}

// Close kills QEMU and waits for it.
func (q *pausedQEMU) Close() {
	if q.ctl != nil {
		q.ctl.Close()
	}
	q.cmd.Process.Kill()
	q.cmd.Wait()
}
