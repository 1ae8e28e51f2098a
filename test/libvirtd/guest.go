package libvirtd

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netctl/netctl/test/vm"
)

// Guest is what a domain boots: world-readable copies of the test VM's
// kernel and initramfs (QEMU runs as libvirt-qemu, and libvirt's DAC driver
// relabels files, not the directories above them), the results share that
// test/vm's init runs /results/cmd from, and the serial console's file.
type Guest struct {
	Name    string // the domain's name
	Dir     string // Daemon.Dir/NAME, mode 0755
	Kernel  string
	Initrd  string
	Share   string // mounted in the guest at /results (9p tag "results"), mode 0777
	Console string // the serial console's file (test/vm's init writes there)

	// Machine is the domain's machine type ("" pc); Devices are more
	// elements for <devices>, each whole and put in as it is (controllers,
	// say: a q35 domain whose PCIe root ports are all taken).
	Machine string
	Devices []string
}

// NewGuest prepares guest NAME that runs script (busybox sh, in the guest
// as root) once booted; the script's output goes to the console file.
// virtio_net is loaded on demand: start the script with
// "netctl-modprobe virtio_net" for a NIC.
func (d *Daemon) NewGuest(ctx context.Context, name, script string) (*Guest, error) {
	k, err := vm.LookupKernel("6.12")
	if err != nil {
		return nil, err
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	img, err := vm.Prepare(ctx, cache, k, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("libvirtd: the 6.12 image (run make vm-prepare): %w", err)
	}
	g := &Guest{Name: name, Dir: filepath.Join(d.Dir, name)}
	g.Kernel, g.Initrd = filepath.Join(g.Dir, "vmlinuz"), filepath.Join(g.Dir, "initrd")
	g.Share, g.Console = filepath.Join(g.Dir, "share"), filepath.Join(g.Dir, "console.log")
	if err := os.Mkdir(g.Dir, 0o755); err != nil {
		return nil, err
	}
	for _, c := range []struct{ from, to string }{{img.Vmlinuz, g.Kernel}, {img.Initrd, g.Initrd}} {
		if err := copyFile(c.from, c.to); err != nil {
			return nil, fmt.Errorf("libvirtd: copy the guest's files: %w", err)
		}
	}
	if err := os.Mkdir(g.Share, 0o777); err != nil {
		return nil, err
	}
	if err := os.Chmod(g.Share, 0o777); err != nil { // past the umask: QEMU writes rc as libvirt-qemu
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(g.Share, "cmd"), []byte(script), 0o644); err != nil {
		return nil, err
	}
	return g, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// DomainXML is a transient TCG domain for g with the given interface
// elements (each a whole <interface>...</interface>) and extra <metadata>
// content (empty for none): 1 vCPU, 256 MiB, machine g.Machine (pc),
// ACPI on (without it the guest's poweroff halts instead), the serial
// console to g.Console, the results share over virtio-9p, g.Devices.
func (g *Guest) DomainXML(metadata string, interfaces ...string) string {
	esc := func(s string) string {
		var b strings.Builder
		xml.EscapeText(&b, []byte(s))
		return b.String()
	}
	md, machine := "", g.Machine
	if machine == "" {
		machine = "pc"
	}
	if metadata != "" {
		md = "  <metadata>\n" + metadata + "\n  </metadata>\n"
	}
	return `<domain type='qemu'>
  <name>` + esc(g.Name) + `</name>
` + md + `  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='` + esc(machine) + `'>hvm</type>
    <kernel>` + esc(g.Kernel) + `</kernel>
    <initrd>` + esc(g.Initrd) + `</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 mitigations=off no_timer_check</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='` + esc(g.Console) + `'/><target port='0'/></serial>
    <filesystem type='mount' accessmode='passthrough'>
      <source dir='` + esc(g.Share) + `'/>
      <target dir='results'/>
    </filesystem>
` + strings.Join(slices.Concat(g.Devices, interfaces), "\n") + `
    <memballoon model='none'/>
  </devices>
</domain>
`
}

// Create writes the domain's XML next to its files and starts it
// transiently (virsh create): virsh's output and error come back as they
// are, so a test can look for a hook's line in the error.
func (d *Daemon) Create(g *Guest, domainXML string) (string, error) {
	f := filepath.Join(g.Dir, "domain.xml")
	if err := os.WriteFile(f, []byte(domainXML), 0o644); err != nil {
		return "", err
	}
	return d.Virsh("create", f)
}

// WaitConsole waits until the guest's console has a line containing s and
// returns the console; on timeout the error carries the console's tail.
func (g *Guest) WaitConsole(ctx context.Context, s string) (string, error) {
	for {
		b, _ := os.ReadFile(g.Console)
		if strings.Contains(string(b), s) {
			return string(b), nil
		}
		select {
		case <-ctx.Done():
			tail := string(b)
			if len(tail) > 3000 {
				tail = tail[len(tail)-3000:]
			}
			return string(b), fmt.Errorf("guest %s: no %q on its console: %w\n%s", g.Name, s, ctx.Err(), tail)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
