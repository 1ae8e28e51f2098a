package l2

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Firmware is a nested QEMU with no OS: started paused (-S), no disk and
// no kernel, booting from the network (-boot n). Hotplug NICs over QMP
// while it is paused, then `cont`: SeaBIOS runs each virtio-net-pci NIC's
// option ROM (iPXE, QEMU's default romfile efi-virtio.rom, which Debian's
// ipxe-qemu installs under /usr/lib/ipxe/qemu, on QEMU's firmware path),
// and iPXE drives the NIC far enough to send DHCP. That proves a data path
// in 2-3 s where a Linux guest takes minutes under nested TCG.
type Firmware struct {
	// Machine is "pc" (default: i440FX, ACPI PCI hotplug) or "q35".
	Machine string
	// RootPorts adds that many pcie-root-port devices (ids rp0, rp1...)
	// on a q35 machine, for NICs hotplugged with bus=rpN.
	RootPorts int
	// MemMB is the guest's memory; default 64.
	MemMB int
	// Name distinguishes the files of several QEMUs under /host/run/l2
	// (default "fw").
	Name string
	// SharedMemory backs guest RAM with a shared memfd
	// (memory-backend-memfd,share=on). A VDUSE device behind vhost-vdpa
	// needs it: vhost-vdpa maps only file-backed shared memory into a
	// VA-based device's IOTLB (vhost_vdpa_va_map skips anonymous private
	// memory), so without it the device sees no guest memory and never
	// uses a buffer.
	SharedMemory bool
	// SecondMonitor adds a second QMP socket (g.QMP2): QEMU serves one
	// client per monitor, so the test keeps one while the code under test
	// (netctl attach) uses the other.
	SecondMonitor bool
	// Extra are more QEMU arguments, appended last (a -chardev, -netdev
	// and -device for a NIC present from the start, such as a vhost-user
	// one). Paths in them are as QEMU sees them (in the chroot, Run).
	Extra []string
	// Dir, when set, runs the host's QEMU directly (the host layer, no
	// chroot) with its QMP socket and serial log in Dir. Empty: in L1,
	// chrooted in /host, files under /host/run/l2.
	Dir string
}

// StartFirmware prepares the chroot and starts a paused firmware-only
// QEMU (TCG, one vCPU) with a QMP socket L1 reaches as g.QMP. It creates
// no NIC: hotplug them (netdev_add, device_add) and then `cont`. Close
// kills QEMU. There is no -no-reboot: system_reset must reset the
// machine (it completes a pending unplug), not end QEMU.
func StartFirmware(ctx context.Context, f Firmware) (*Guest, error) {
	if f.Machine == "" {
		f.Machine = "pc"
	}
	if f.Machine != "pc" && f.Machine != "q35" {
		return nil, fmt.Errorf("l2: machine %q: use pc or q35", f.Machine)
	}
	if f.RootPorts > 0 && f.Machine != "q35" {
		return nil, fmt.Errorf("l2: root ports need machine q35, not %s", f.Machine)
	}
	if f.MemMB == 0 {
		f.MemMB = 64
	}
	if f.Name == "" {
		f.Name = "fw"
	}
	root, dir := Root, Run
	if f.Dir != "" {
		root, dir = "", f.Dir
	} else if err := Chroot(); err != nil {
		return nil, err
	}
	qmpSock, serial := dir+"/"+f.Name+"-qmp.sock", dir+"/"+f.Name+"-serial.log"
	g := &Guest{QMP: root + qmpSock, Serial: root + serial, done: make(chan struct{})}
	os.Remove(g.QMP)
	os.Remove(g.Serial)
	g.Args = []string{QEMU, "-S", "-nodefaults", "-no-user-config", "-display", "none",
		"-accel", "tcg", "-m", fmt.Sprint(f.MemMB), "-smp", "1",
		"-boot", "n", "-serial", "file:" + serial,
		"-qmp", "unix:" + qmpSock + ",server=on,wait=off"}
	if f.SharedMemory {
		g.Args = append(g.Args, "-object", fmt.Sprintf("memory-backend-memfd,id=ram0,size=%dM,share=on", f.MemMB),
			"-machine", f.Machine+",memory-backend=ram0")
	} else {
		g.Args = append(g.Args, "-machine", f.Machine)
	}
	if f.SecondMonitor {
		g.QMP2 = root + dir + "/" + f.Name + "-qmp2.sock"
		os.Remove(g.QMP2)
		g.Args = append(g.Args, "-qmp", "unix:"+dir+"/"+f.Name+"-qmp2.sock,server=on,wait=off")
	}
	for i := 0; i < f.RootPorts; i++ {
		g.Args = append(g.Args, "-device", fmt.Sprintf("pcie-root-port,id=rp%d,bus=pcie.0,chassis=%d", i, i+1))
	}
	g.Args = append(g.Args, f.Extra...)
	if root == "" {
		g.cmd = exec.Command(g.Args[0], g.Args[1:]...)
	} else {
		g.cmd = exec.Command("chroot", append([]string{root}, g.Args...)...)
	}
	g.cmd.Stderr = &g.stderr
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start firmware QEMU: %w", err)
	}
	g.PID = g.cmd.Process.Pid
	go func() {
		g.waitErr = g.cmd.Wait()
		close(g.done)
	}()
	if err := g.poll(ctx, 30*time.Second, func() bool { _, err := os.Stat(g.QMP); return err == nil }); err != nil {
		g.Close()
		return nil, fmt.Errorf("firmware QEMU's QMP socket: %w", err)
	}
	return g, nil
}
