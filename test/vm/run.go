package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Share is a host directory mounted in the guest over 9p before the
// command runs.
type Share struct {
	HostPath  string
	GuestPath string // where to mount it in the guest
	ReadOnly  bool
}

// RunOptions say what to run in the VM and how.
type RunOptions struct {
	// Script is a POSIX shell script (busybox sh) run as root in the
	// guest, in /tmp; the host's / is at /host.
	Script  string
	Env     map[string]string // exported before Script runs
	Timeout time.Duration     // default 5 minutes
	SMP     int               // vCPUs, default 1
	MemMB   int               // default 1024
	CPU     string            // QEMU -cpu, default "max,erms=off"
	Shares  []Share
	// Preload are on-demand modules (Kernel.OnDemand) the init loads
	// before the command, where a kernel panic is a boot panic (booted
	// again once): kvm_amd under TCG with 2 vCPUs.
	Preload []string
	Stdout  io.Writer // the command's output, streamed; default os.Stdout
	// FreezeAfter: a guest whose heartbeat (its init's, every 5 s) stops
	// this long is killed as frozen (*FrozenError) instead of running
	// into Timeout. Default 3 minutes; negative turns the watchdog off.
	FreezeAfter time.Duration
	// QEMUArgs are appended to QEMU's command line (tests only).
	QEMUArgs []string
}

// Result of a run that reported an exit status.
type Result struct {
	ExitCode int
	Wall     time.Duration
	Console  string // the guest kernel's console log
}

var panicLine = regexp.MustCompile(`Kernel panic - not syncing:[^\n]*`)

// Run boots img, runs opts.Script and returns its exit status. The error
// is non-nil only when the harness could not get a status: *TimeoutError,
// *PanicError, *QEMUError, *NoStatusError, or a setup error.
func (img *Image) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.SMP == 0 {
		opts.SMP = 1
	}
	if opts.MemMB == 0 {
		opts.MemMB = 1024
	}
	if opts.CPU == "" {
		opts.CPU = "max,erms=off"
	}
	if opts.FreezeAfter == 0 {
		opts.FreezeAfter = DefaultFreezeAfter
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	runs := filepath.Join(img.Cache, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp(runs, "run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	accel, err := img.accel(ctx)
	if err != nil {
		return nil, err
	}
	opts.Env = guestEnv(accel, opts)
	if len(opts.Preload) > 0 {
		for _, m := range opts.Preload {
			if !slices.Contains(img.OnDemand, m) {
				return nil, fmt.Errorf("vm: preload %s: not an on-demand module of the %s image (%s)", m, img.Name, strings.Join(img.OnDemand, ", "))
			}
		}
		if err := os.WriteFile(filepath.Join(out, "preload"), []byte(strings.Join(opts.Preload, " ")+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(out, "cmd"), []byte(img.script(opts)), 0o644); err != nil {
		return nil, err
	}
	var res *Result
	for attempt := 1; ; attempt++ {
		release, err := takeSlot(ctx, img.Cache)
		if err != nil {
			return nil, err
		}
		res, err = img.boot(ctx, out, accel, opts)
		release()
		if err != nil && res != nil && res.Console != "" {
			// Keep the whole console of a failed run: the error shows only its tail.
			if path := img.keepConsole(res.Console); path != "" {
				err = fmt.Errorf("%w\n(whole console log: %s)", err, path)
			}
		}
		if attempt < 2 && bootPanic(err, res) {
			fmt.Fprintf(opts.Stdout, "netctl-vm: the guest kernel panicked while booting, before the command ran; booting again once (%v)\n",
				strings.SplitN(err.Error(), "\n", 2)[0])
			os.Remove(filepath.Join(out, "rc"))
			continue
		}
		return res, err
	}
}

// DefaultFreezeAfter is how long a guest may go without a heartbeat. A
// TCG guest's busybox loop sleeps 5 s of wall time; on a 2-core machine
// running two 2-vCPU VMs it beats late by seconds, not minutes. A VM that
// froze in CI (a nested KVM guest on its only vCPU) ran into the 31-minute
// timeout; this ends it within minutes.
const DefaultFreezeAfter = 3 * time.Minute

// readyMarker is what the guest init prints once the kernel has booted and
// just before the command runs.
const readyMarker = "netctl-vm: ready after"

// bootPanic is true when err is a guest kernel panic that came before the
// init's ready line: the command never ran, so the run says nothing about
// it. Seen with Debian's 6.12 under multi-threaded TCG with 2 vCPUs: an
// int3 left by the kernel's boot-time text patching (text_poke_bp) hit in
// sched_clock_cpu on the other vCPU, "Fatal exception in interrupt" at
// ~2 s uptime, seen twice so far in many 2-vCPU boots. Run boots such a guest
// once more; a panic after the ready line (a test that crashed the kernel)
// is reported as it is.
func bootPanic(err error, res *Result) bool {
	var p *PanicError
	return errors.As(err, &p) && res != nil && !strings.Contains(res.Console, readyMarker)
}

// keepConsole writes a failed run's whole console under the cache's
// failed/ directory and returns its path ("" when it could not).
func (img *Image) keepConsole(console string) string {
	kept := filepath.Join(img.Cache, "failed")
	if os.MkdirAll(kept, 0o755) != nil {
		return ""
	}
	path := filepath.Join(kept, time.Now().UTC().Format("20060102-150405.000")+"-console.log")
	if os.WriteFile(path, []byte(console), 0o644) != nil {
		return ""
	}
	return path
}

// script is the file the guest init runs: environment, mounts, command.
// guestEnv is opts.Env plus how the guest runs: NETCTL_VM_ACCEL (kvm or
// tcg), NETCTL_VM_CPU (QEMU's -cpu) and NETCTL_VM_SMP (vCPUs), which
// benchmarks record. The harness's values win over the caller's.
func guestEnv(accel string, opts RunOptions) map[string]string {
	env := maps.Clone(opts.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["NETCTL_VM_ACCEL"], env["NETCTL_VM_CPU"], env["NETCTL_VM_SMP"] = accel, opts.CPU, strconv.Itoa(opts.SMP)
	return env
}

func (img *Image) script(opts RunOptions) string {
	var b strings.Builder
	env := map[string]string{
		"NETCTL_VM_KERNEL":  img.Name,
		"NETCTL_VM_CAPS":    img.Kernel.CapsString(),
		"NETCTL_VM_MISSING": strings.Join(img.Missing, ","),
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	for i, s := range opts.Shares {
		o := "trans=virtio,version=9p2000.L,msize=512000"
		if s.ReadOnly {
			o += ",ro"
		}
		fmt.Fprintf(&b, "mkdir -p %[1]s 2>/dev/null; mount -t 9p -o %[2]s share%[3]d %[1]s || { echo \"netctl-vm: cannot mount %[4]s at %[1]s\"; exit 121; }\n",
			shellQuote(s.GuestPath), o, i, shellQuote(s.HostPath))
	}
	b.WriteString(opts.Script)
	b.WriteString("\n")
	return b.String()
}

func (img *Image) qemuArgs(out, accel string, opts RunOptions) []string {
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", accel, "-machine", "pc", "-cpu", opts.CPU,
		"-m", strconv.Itoa(opts.MemMB), "-smp", strconv.Itoa(opts.SMP),
		"-kernel", img.Vmlinuz, "-initrd", img.Initrd,
		// no_timer_check: a TCG boot on a busy host can fail the IO-APIC
		// timer check and panic at 0.004 s ("IO-APIC + timer doesn't work!").
		"-append", "console=ttyS0 quiet panic=-1 oops=panic mitigations=off no_timer_check",
		"-serial", "file:" + filepath.Join(out, "console.log"),
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + out + ",mount_tag=results,security_model=passthrough",
		"-device", "virtio-serial-pci",
		"-chardev", "file,id=out,path=" + filepath.Join(out, "out.log"),
		"-device", "virtserialport,chardev=out,name=netctl.out",
		"-chardev", "file,id=beat,path=" + filepath.Join(out, "beat.log"),
		"-device", "virtserialport,chardev=beat,name=netctl.beat",
		"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
	}
	for i, s := range opts.Shares {
		v := fmt.Sprintf("local,path=%s,mount_tag=share%d,security_model=passthrough,multidevs=remap", s.HostPath, i)
		if s.ReadOnly {
			v += ",readonly=on"
		}
		args = append(args, "-virtfs", v)
	}
	return append(args, opts.QEMUArgs...)
}

func (img *Image) boot(ctx context.Context, out, accel string, opts RunOptions) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.Command("qemu-system-x86_64", img.qemuArgs(out, accel, opts)...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A beat file left by an earlier boot of the same run goes before QEMU
	// starts: removed after, it could unlink the file QEMU just opened.
	os.Remove(filepath.Join(out, "beat.log"))
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, &QEMUError{Status: -1, Stderr: "qemu-system-x86_64 not found: run make vm-deps"}
		}
		return nil, fmt.Errorf("vm: start qemu: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	streamDone := make(chan struct{})
	stopStream := make(chan struct{})
	go func() { streamFile(filepath.Join(out, "out.log"), opts.Stdout, stopStream); close(streamDone) }()

	beat := filepath.Join(out, "beat.log")
	frozen := make(chan time.Duration, 1)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	if opts.FreezeAfter > 0 {
		go watchBeat(beat, opts.FreezeAfter, time.Second, frozen, stopWatch)
	}

	var waitErr error
	timedOut := false
	var froze time.Duration
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		waitErr = <-done
		timedOut = true
	case froze = <-frozen:
		cmd.Process.Kill()
		waitErr = <-done
	}
	close(stopStream)
	<-streamDone
	wall := time.Since(t0)
	console, _ := os.ReadFile(filepath.Join(out, "console.log"))
	res := &Result{Wall: wall, Console: string(console)}
	if froze > 0 {
		return res, &FrozenError{After: froze.Round(time.Second), LastBeat: lastBeat(beat), Console: res.Console}
	}
	if timedOut {
		if ctx.Err() == context.DeadlineExceeded {
			return res, &TimeoutError{After: opts.Timeout, Console: res.Console}
		}
		return res, ctx.Err()
	}
	status := 0
	if ee, ok := waitErr.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if waitErr != nil {
		return res, fmt.Errorf("vm: wait for qemu: %w", waitErr)
	}
	rcFile, rcErr := os.ReadFile(filepath.Join(out, "rc"))
	code, err := decodeStatus(status, string(rcFile), rcErr == nil, res.Console, stderr.String())
	res.ExitCode = code
	return res, err
}

// decodeStatus turns QEMU's exit status, the guest's rc file and the
// console into the command's exit code or a harness error. isa-debug-exit
// makes QEMU exit with (rc<<1)|1; QEMU's own failures also exit 1, so an
// odd status counts as the guest's only when the guest wrote its rc file.
func decodeStatus(status int, rcFile string, haveRC bool, console, stderr string) (int, error) {
	if m := panicLine.FindString(console); m != "" {
		return -1, &PanicError{Message: strings.TrimSpace(m), Console: console}
	}
	if status&1 == 1 && haveRC {
		rc, err := strconv.Atoi(strings.TrimSpace(rcFile))
		if err != nil {
			return -1, fmt.Errorf("vm: guest wrote a bad rc file %q", rcFile)
		}
		return rc, nil
	}
	if status != 0 && !haveRC {
		return -1, &QEMUError{Status: status, Stderr: stderr}
	}
	return -1, &NoStatusError{Status: status, Console: console}
}

// streamFile copies what QEMU appends to path to w until stop is closed,
// then copies the rest.
func streamFile(path string, w io.Writer, stop <-chan struct{}) {
	var f *os.File
	buf := make([]byte, 64<<10)
	for {
		stopped := false
		select {
		case <-stop:
			stopped = true
		case <-time.After(50 * time.Millisecond):
		}
		if f == nil {
			f, _ = os.Open(path)
		}
		if f != nil {
			for {
				n, err := f.Read(buf)
				if n > 0 {
					w.Write(buf[:n])
				}
				if err != nil || n == 0 {
					break
				}
			}
		}
		if stopped {
			if f != nil {
				f.Close()
			}
			return
		}
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellQuote quotes s for the guest's shell.
func ShellQuote(s string) string { return shellQuote(s) }

// watchBeat sends on frozen, once, when the file the guest's heartbeat
// goes to has not grown for after (counted from the start until the first
// beat), checking every poll, until stop is closed.
func watchBeat(path string, after, poll time.Duration, frozen chan<- time.Duration, stop <-chan struct{}) {
	var size int64 = -1
	last := time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if fi, err := os.Stat(path); err == nil && fi.Size() != size {
				size, last = fi.Size(), now
				continue
			}
			if d := now.Sub(last); d >= after {
				frozen <- d
				return
			}
		}
	}
}

// lastBeat is the guest uptime of the heartbeat file's last line.
func lastBeat(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}
