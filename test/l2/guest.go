package l2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Paths. Root is where L1 sees the host's / (read-only 9p); Run is the
// work directory as QEMU sees it in the chroot, Root+Run as L1 sees it.
const (
	Root = "/host"
	Run  = "/run/l2"
	QEMU = "/usr/bin/qemu-system-x86_64"
)

// BootTrims shorten an L2 boot by about a third (no jitterentropy, no
// X.509 list, no crypto self-tests): real-vmm-recipes.md part 2. no_timer_check
// skips the IO-APIC timer check, which a TCG guest on a busy host can fail
// ("IO-APIC + timer doesn't work!", a panic at 0.004 s).
const BootTrims = "no_timer_check rodata=off cryptomgr.notests initcall_blacklist=jent_mod_init,load_system_certificate_list"

// NIC is one virtio-net-pci NIC of the guest on a tap netdev.
type NIC struct {
	ID     string // the device's id (nic0)
	MAC    string
	Tap    string // ifname= of the tap QEMU creates in L1
	Netdev string // extra -netdev tap options ("vnet_hdr=off")
	Device string // extra -device options ("mrg_rxbuf=off")
	// NoVhost: QEMU's userspace virtio-net (vhost=on otherwise).
	NoVhost bool
}

// Config of one L2 boot.
type Config struct {
	Vmlinuz string // the L1 kernel's bzImage, as L1 sees it (under /host)
	NICs    []NIC
	MemMB   int // default 256
	// Reboot: a reset (QMP system_reset, the guest's reboot) restarts the
	// guest instead of ending QEMU (-no-reboot otherwise).
	Reboot bool
	// RebindOn: the MAC of a NIC whose carrier going down (QMP set_link
	// off) makes the guest's init unbind every other virtio-net device
	// from its driver and bind it again (a reset of those devices by
	// their driver, what a virtio_net reload does to them), bring them
	// up, and print "L2-REBOUND n devices=k " (k: how many were unbound and
	// bound again; an "L2-ERR" line says which failed); once it sees the carrier back it prints
	// "L2-REARMED n" (wait for it before the next set_link off: a slow
	// guest may not look in between).
	RebindOn string
	// Accel is QEMU's -accel: "tcg" (the default) or "kvm" (a nested KVM
	// guest: L1 must have loaded kvm_amd, see LoadKVM).
	Accel string
	// Name, when set, keeps this QEMU's files apart from another's in the
	// same L1 (NAME-qmp.sock, NAME-serial.log): two QEMUs of one guest,
	// a migration's source and destination.
	Name string
	// Incoming is QEMU's -incoming ("defer": wait for migrate-incoming).
	Incoming string
	// IP is MAC@ADDR/PREFIX: the guest gives that NIC the address when
	// it appears (hotplugged ones too).
	IP string
}

// GuestNIC is what the L2 init printed for one NIC.
type GuestNIC struct {
	Name     string // eth0
	MAC      string
	Driver   string
	Features string // /sys/class/net/NAME/device/features: '0'/'1' per bit, bit 0 first
}

// Guest is a running L2 QEMU. Close it on every path.
type Guest struct {
	PID    int    // QEMU's
	QMP    string // the QMP socket as L1 sees it
	QMP2   string // a second QMP monitor (Firmware.SecondMonitor), or ""
	Serial string // the serial log as L1 sees it
	Args   []string

	reboot  bool // Config.Reboot: a reset restarts the guest
	cmd     *exec.Cmd
	stderr  bytes.Buffer
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// ChrootQMP is the QMP socket as a process chrooted in /host sees it.
func (g *Guest) ChrootQMP() string { return strings.TrimPrefix(g.QMP, Root) }

// Chroot makes /host usable as a chroot for the host's binaries: L1's
// /dev, /proc and /sys bound in, a tmpfs on /host/run (the host's /run
// is not needed there). Idempotent.
func Chroot() error {
	// This thread's mounts, not /proc/mounts (the thread group leader's):
	// a goroutine that unshared its mount namespace on a locked main
	// thread and ended (macvtap.ProbeOffloads can) leaves the leader
	// wedged in that namespace, whose /host/run has no tmpfs; a second
	// tmpfs would then hide the first and every socket in it.
	mounts, err := os.ReadFile("/proc/thread-self/mounts")
	if err != nil {
		return err
	}
	mounted := func(p string) bool { return bytes.Contains(mounts, []byte(" "+p+" ")) }
	for _, m := range []string{"dev", "sys"} {
		if !mounted(Root + "/" + m) {
			if err := unix.Mount("/"+m, Root+"/"+m, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind /%s into %s: %w", m, Root, err)
			}
		}
	}
	if !mounted(Root + "/proc") {
		if err := unix.Mount("proc", Root+"/proc", "proc", 0, ""); err != nil {
			return fmt.Errorf("proc on %s/proc: %w", Root, err)
		}
	}
	if !mounted(Root + "/run") {
		if err := unix.Mount("run", Root+"/run", "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs on %s/run: %w", Root, err)
		}
	}
	return os.MkdirAll(Root+Run, 0o755)
}

// Host runs a host binary (absolute path: busybox's chroot runs its own
// applet for a bare name) in the chroot and returns its standard output.
func Host(ctx context.Context, stdin []byte, bin string, args ...string) ([]byte, error) {
	if !filepath.IsAbs(bin) {
		return nil, fmt.Errorf("l2: %s: give the host binary's absolute path", bin)
	}
	cmd := exec.CommandContext(ctx, "chroot", append([]string{Root, bin}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("chroot %s %s %s: %w: %s", Root, bin, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// Vmlinux returns the ELF vmlinux inside the bzImage vmlinuz (its
// compressed payload, decompressed by the host's own zstd, xz or gzip in
// the chroot): what QEMU's -kernel takes for the nested guest.
func Vmlinux(ctx context.Context, vmlinuz string) ([]byte, error) {
	bz, err := os.ReadFile(vmlinuz)
	if err != nil {
		return nil, err
	}
	p, kind, err := Payload(bz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", vmlinuz, err)
	}
	tool := map[string]string{Zstd: "/usr/bin/zstd", XZ: "/usr/bin/xz", Gzip: "/usr/bin/gzip"}[kind]
	elf, err := Host(ctx, p, tool, "-dc")
	if err != nil {
		return nil, fmt.Errorf("decompress %s's %s payload: %w", vmlinuz, kind, err)
	}
	if !bytes.HasPrefix(elf, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s: the payload is not an ELF vmlinux", vmlinuz)
	}
	return elf, nil
}

// prepare writes vmlinux and initrd.gz to /host/run/l2.
func prepare(ctx context.Context, vmlinuz string) error {
	elf, err := Vmlinux(ctx, vmlinuz)
	if err != nil {
		return err
	}
	if err := os.WriteFile(Root+Run+"/vmlinux", elf, 0o644); err != nil {
		return err
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	mods, err := LocalModules()
	if err != nil {
		return err
	}
	rd, err := Initramfs(bb, mods)
	if err != nil {
		return err
	}
	return os.WriteFile(Root+Run+"/initrd.gz", rd, 0o644)
}

// PrepareFiles writes the L2 kernel (the uncompressed vmlinux of the
// bzImage vmlinuz) and the L2 initramfs (whose init reports each NIC as
// WaitNICs reads it, hotplugged ones included) to Root+Run, after Chroot,
// and returns their paths as a process chrooted in Root sees them: for a
// guest another program boots (a libvirt domain's <kernel>, <initrd>).
func PrepareFiles(ctx context.Context, vmlinuz string) (vmlinux, initrd string, err error) {
	if err := Chroot(); err != nil {
		return "", "", err
	}
	if err := prepare(ctx, vmlinuz); err != nil {
		return "", "", err
	}
	return Run + "/vmlinux", Run + "/initrd.gz", nil
}

// Start prepares the chroot and the L2 files and starts QEMU (TCG, one
// vCPU) with cfg's NICs, each on a tap QEMU creates with vhost=on.
func Start(ctx context.Context, cfg Config) (*Guest, error) {
	if err := Chroot(); err != nil {
		return nil, err
	}
	if err := prepare(ctx, cfg.Vmlinuz); err != nil {
		return nil, err
	}
	if cfg.MemMB == 0 {
		cfg.MemMB = 256
	}
	files := ""
	if cfg.Name != "" {
		files = cfg.Name + "-"
	}
	g := &Guest{QMP: Root + Run + "/" + files + "qmp.sock", Serial: Root + Run + "/" + files + "serial.log", done: make(chan struct{}), reboot: cfg.Reboot}
	os.Remove(g.QMP)
	os.Remove(g.Serial)
	accel := cfg.Accel
	if accel == "" {
		accel = "tcg"
	}
	appendArgs := "console=ttyS0 quiet panic=-1 mitigations=off " + BootTrims
	if cfg.RebindOn != "" {
		appendArgs += " l2.rebind=" + strings.ToLower(cfg.RebindOn)
	}
	if cfg.IP != "" {
		appendArgs += " l2.ip=" + strings.ToLower(cfg.IP)
	}
	g.Args = []string{QEMU, "-nodefaults", "-no-user-config", "-display", "none",
		"-machine", "pc", "-accel", accel, "-m", fmt.Sprint(cfg.MemMB), "-smp", "1",
		"-kernel", Run + "/vmlinux", "-initrd", Run + "/initrd.gz",
		"-append", appendArgs,
		"-serial", "file:" + Run + "/" + files + "serial.log",
		"-qmp", "unix:" + Run + "/" + files + "qmp.sock,server=on,wait=off"}
	if cfg.Incoming != "" {
		g.Args = append(g.Args, "-incoming", cfg.Incoming)
	}
	if !cfg.Reboot {
		g.Args = append(g.Args, "-no-reboot")
	}
	for i, n := range cfg.NICs {
		nd := fmt.Sprintf("tap,id=n%d,ifname=%s,script=no,downscript=no,vhost=%s", i, n.Tap, map[bool]string{false: "on", true: "off"}[n.NoVhost])
		if n.Netdev != "" {
			nd += "," + n.Netdev
		}
		dev := fmt.Sprintf("virtio-net-pci,netdev=n%d,id=%s,mac=%s", i, n.ID, n.MAC)
		if n.Device != "" {
			dev += "," + n.Device
		}
		g.Args = append(g.Args, "-netdev", nd, "-device", dev)
	}
	g.cmd = exec.Command("chroot", append([]string{Root}, g.Args...)...)
	g.cmd.Stderr = &g.stderr
	// No Pdeathsig: it fires when the forking OS thread ends, and Go ends
	// threads that a goroutine left locked (netns code does), which killed
	// QEMU mid-test. Close kills it; if the test binary dies, the VM ends.
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start L2 QEMU: %w", err)
	}
	g.PID = g.cmd.Process.Pid // busybox chroot execs QEMU: same process
	go func() {
		g.waitErr = g.cmd.Wait()
		close(g.done)
	}()
	// QMP is up once a client can connect: the socket file exists from
	// QEMU's bind, before its listen, and a connect in between is refused
	// (a loaded CI run's migrate test hit that on both kernels).
	up := func() bool {
		c, err := net.DialTimeout("unix", g.QMP, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	if err := g.poll(ctx, 30*time.Second, up); err != nil {
		g.Close()
		return nil, fmt.Errorf("L2 QEMU's QMP socket: %w", err)
	}
	return g, nil
}

// poll calls ok every 200 ms until it is true, QEMU exits, ctx ends or
// timeout passes.
func (g *Guest) poll(ctx context.Context, timeout time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok() {
			return nil
		}
		select {
		case <-g.done:
			if ok() {
				return nil
			}
			return fmt.Errorf("QEMU exited (%v): %s", g.waitErr, g.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// nicLine is one whole L2-NIC line: it ends in uptime= and a newline, so
// a line the init is still writing (cut inside the feature word) is not
// taken for a NIC.
var nicLine = regexp.MustCompile(`L2-NIC (\S+) mac=(\S+) driver=(\S*) features=([01]+) uptime=\S+\r?\n`)

// ParseNICs returns the NICs the L2 init reported on console, by MAC,
// from complete lines only.
func ParseNICs(console string) map[string]GuestNIC {
	nics := map[string]GuestNIC{}
	for _, m := range nicLine.FindAllStringSubmatch(console, -1) {
		nics[m[2]] = GuestNIC{Name: m[1], MAC: m[2], Driver: m[3], Features: m[4]}
	}
	return nics
}

// WaitNICs waits until the L2 init has reported n NICs and returns them
// by MAC.
func (g *Guest) WaitNICs(ctx context.Context, n int, timeout time.Duration) (map[string]GuestNIC, error) {
	var nics map[string]GuestNIC
	err := g.poll(ctx, timeout, func() bool {
		nics = ParseNICs(g.Console())
		return len(nics) >= n || strings.Contains(g.Console(), "L2-ERR") || (g.reboot && g.diedBooting())
	})
	if err == nil && len(nics) < n {
		err = fmt.Errorf("the L2 init failed: %s", regexp.MustCompile(`(?m)^.*L2-ERR.*$`).FindString(g.Console()))
		if g.diedBooting() {
			err = errors.New("the L2 kernel died while booting")
		}
	}
	if err != nil {
		return nics, fmt.Errorf("waiting for %d NICs in L2 (%d so far): %w", n, len(nics), err)
	}
	return nics, nil
}

// Console is the L2 serial log so far.
func (g *Guest) Console() string {
	b, _ := os.ReadFile(g.Serial)
	return string(b)
}

// Stderr is what QEMU printed.
func (g *Guest) Stderr() string {
	select {
	case <-g.done:
		return g.stderr.String()
	default:
		return "" // still being written
	}
}

// Close kills QEMU and waits for it (at most 10 s). Idempotent.
func (g *Guest) Close() error {
	var err error
	g.once.Do(func() {
		g.cmd.Process.Kill()
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			err = errors.New("l2: QEMU did not exit 10 s after SIGKILL")
		}
	})
	return err
}
