// Command netctl-vm is the front end of netctl's real-kernel test VM
// (package test/vm).
//
//	netctl-vm prepare [-kernel all|6.12|6.1]      fetch kernels, build initramfs images (idempotent)
//	netctl-vm run [-kernel 6.12] [-timeout 5m] [-smp 1] [-mem 1024] -- CMD [ARG...]
//	                                               run CMD in the guest (host / at /host) and exit with its status
//	netctl-vm exec BINARY [ARG...]                 go test -exec wrapper: run a test binary in the guest
//
// exec reads the package's testdata/netctl-vm.conf (smp=, mem=, timeout=)
// if there is one, tells the guest the kernel image's path
// ($NETCTL_VM_VMLINUZ, under /host) and, with $NETCTL_VM_OUTDIR set, shares
// that host directory writable at /host$NETCTL_VM_OUTDIR.
//
// The kernel is $NETCTL_VM_KERNEL (default 6.12) unless -kernel says
// otherwise. Harness failures exit 124 (timeout, or a guest frozen: no
// heartbeat for 3 minutes), 125 (guest panic or no status), 126 (QEMU
// failed) or 127 (setup failed), each with a message that says which.
package main

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netctl/netctl/test/vm"
)

const (
	exitTimeout = 124
	exitGuest   = 125
	exitQEMU    = 126
	exitSetup   = 127
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	var code int
	switch os.Args[1] {
	case "prepare":
		code = prepare(ctx, os.Args[2:])
	case "run":
		code = run(ctx, os.Args[2:])
	case "exec":
		code = execTest(ctx, os.Args[2:])
	default:
		usage()
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  netctl-vm prepare [-kernel all|6.12|6.1]
  netctl-vm run [-kernel K] [-timeout D] [-smp N] -- CMD [ARG...]
  netctl-vm exec BINARY [ARG...]     (go test -exec)`)
	os.Exit(2)
}

func defaultKernel() string {
	if k := os.Getenv("NETCTL_VM_KERNEL"); k != "" {
		return k
	}
	return "6.12"
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "netctl-vm:", strings.TrimPrefix(err.Error(), "vm: "))
	var te *vm.TimeoutError
	var fe *vm.FrozenError
	var pe *vm.PanicError
	var ne *vm.NoStatusError
	var qe *vm.QEMUError
	switch {
	case errors.As(err, &te), errors.As(err, &fe):
		return exitTimeout
	case errors.As(err, &pe), errors.As(err, &ne):
		return exitGuest
	case errors.As(err, &qe):
		return exitQEMU
	}
	return exitSetup
}

func image(ctx context.Context, name string) (*vm.Image, error) {
	k, err := vm.LookupKernel(name)
	if err != nil {
		return nil, err
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	return vm.Prepare(ctx, cache, k, os.Stderr)
}

func prepare(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("prepare", flag.ExitOnError)
	kernel := fs.String("kernel", "all", "kernels to prepare: all, or a comma-separated list of "+strings.Join(vm.KernelNames(), ", "))
	fs.Parse(args)
	ks, err := vm.SelectKernels(*kernel)
	if err != nil {
		return fail(err)
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return fail(err)
	}
	for _, k := range ks {
		img, err := vm.Prepare(ctx, cache, k, os.Stderr)
		if err != nil {
			return fail(err)
		}
		fmt.Println(img.Summary())
	}
	return 0
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kernel := fs.String("kernel", defaultKernel(), "kernel to boot")
	timeout := fs.Duration("timeout", 5*time.Minute, "kill the VM after this long")
	smp := fs.Int("smp", 1, "vCPUs")
	mem := fs.Int("mem", 1024, "guest memory in MiB")
	fs.Parse(args)
	if fs.NArg() == 0 {
		usage()
	}
	img, err := image(ctx, *kernel)
	if err != nil {
		return fail(err)
	}
	var q []string
	for _, a := range fs.Args() {
		q = append(q, vm.ShellQuote(a))
	}
	res, err := img.Run(ctx, vm.RunOptions{Script: strings.Join(q, " "), Timeout: *timeout, SMP: *smp, MemMB: *mem})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "netctl-vm: kernel %s: exit %d after %.1fs\n", img.Name, res.ExitCode, res.Wall.Seconds())
	return res.ExitCode
}

// execTest runs a compiled test binary in the guest, as go test -exec does:
// the binary's directory is shared read-write (test logs, coverage), the
// working directory is the package directory under /host, and
// -test.*=/abs/path arguments are rewritten to /host/abs/path.
func execTest(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage()
	}
	bin, err := filepath.Abs(args[0])
	if err != nil {
		return fail(err)
	}
	if err := checkStatic(bin); err != nil {
		return fail(err)
	}
	img, err := image(ctx, defaultKernel())
	if err != nil {
		return fail(err)
	}
	cwd, _ := os.Getwd()
	bdir := filepath.Dir(bin)
	timeout := 10 * time.Minute
	var q []string
	q = append(q, vm.ShellQuote("/host"+bin))
	ti, testTimeout := -1, time.Duration(0) // where -test.timeout is in q, and its value
	for _, a := range args[1:] {
		if name, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-test.") && strings.HasPrefix(val, "/") {
			a = name + "=/host" + val
		}
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				timeout = d + time.Minute
				ti, testTimeout = len(q), d
			}
		}
		q = append(q, vm.ShellQuote(a))
	}
	if v := os.Getenv("NETCTL_VM_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NETCTL_") && k != "NETCTL_VM_KERNEL" || k == "GOTRACEBACK" || k == "CI" {
			env[k] = v
		}
	}
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		env["GOCOVERDIR"] = "/host" + d
	}
	script := func() string {
		return fmt.Sprintf("cd %s || exit 121\nexec %s", vm.ShellQuote("/host"+cwd), strings.Join(q, " "))
	}
	smp, mem := 1, 0
	var preload []string
	retry := false
	if v := os.Getenv("NETCTL_VM_SMP"); v != "" {
		fmt.Sscan(v, &smp)
	}
	if err := packageOptions(cwd, &smp, &mem, &timeout, &preload, &retry); err != nil {
		return fail(err)
	}
	env["NETCTL_VM_VMLINUZ"] = "/host" + img.Vmlinuz
	shares := []vm.Share{{HostPath: bdir, GuestPath: "/host" + bdir}}
	if d := os.Getenv("NETCTL_VM_OUTDIR"); d != "" {
		// A writable host directory for what a test keeps (samples):
		// the guest sees it at /host$NETCTL_VM_OUTDIR.
		if d, err = filepath.Abs(d); err == nil {
			err = os.MkdirAll(d, 0o755)
		}
		if err != nil {
			return fail(err)
		}
		env["NETCTL_VM_OUTDIR"] = d
		shares = append(shares, vm.Share{HostPath: d, GuestPath: "/host" + d})
	}
	opts := vm.RunOptions{
		Env:     env,
		SMP:     smp,
		MemMB:   mem,
		Shares:  shares,
		Preload: preload,
	}
	run := func(left time.Duration, again bool) (*vm.Result, error) {
		opts.Timeout = left
		if again && ti >= 0 {
			// The second run gets what is left, so that its own
			// -test.timeout (with a goroutine dump) fires before go
			// test's kill of this process.
			q[ti] = vm.ShellQuote("-test.timeout=" + min(testTimeout, left-time.Minute).String())
		}
		opts.Script = script()
		return img.Run(ctx, opts)
	}
	t0 := time.Now()
	res, err := runAgainIfFrozen(run, timeout, retry, func() time.Duration { return time.Since(t0) }, os.Stderr)
	if err != nil {
		return fail(err)
	}
	fmt.Fprint(os.Stderr, exitReport(img.Name, res))
	return res.ExitCode
}

// frozeAgain starts the line netctl-vm exec prints when it runs a test
// binary again after its VM froze; testcheck lists the packages it finds
// it in.
const frozeAgain = "netctl-vm: the guest froze; running the test binary again in a new VM"

// minAgain is the least time left of the run's timeout for which a frozen
// package is run again.
const minAgain = 3 * time.Minute

// runAgainIfFrozen runs the test binary's VM (run, within timeout) and, if
// the package asks for it (retry=frozen in netctl-vm.conf) and the VM
// froze (*vm.FrozenError: no heartbeat for minutes, seen when the
// emulator's nested SVM wedged a 6.1 L1 beside a nested KVM guest), once
// more in a new VM within what is left of timeout, saying so on w. A
// second freeze, any other error, or too little time left is returned.
func runAgainIfFrozen(run func(left time.Duration, again bool) (*vm.Result, error), timeout time.Duration, retry bool, elapsed func() time.Duration, w io.Writer) (*vm.Result, error) {
	res, err := run(timeout, false)
	var fz *vm.FrozenError
	if !retry || !errors.As(err, &fz) {
		return res, err
	}
	left := timeout - elapsed()
	if left < minAgain {
		fmt.Fprintf(w, "\nnetctl-vm: the guest froze with %s left of the run's timeout: not running it again\n", left.Round(time.Second))
		return res, err
	}
	// A newline first: the binary's last line may have been cut by the freeze.
	fmt.Fprintf(w, "\n%s (once, within the %s left; a second freeze fails the run). The first run:\n%v\n", frozeAgain, left.Round(time.Second), err)
	return run(left, true)
}

// exitReport is what netctl-vm exec adds to go test's output when the test
// binary exits non-zero: a line saying so and, unless it was a plain test
// failure (exit 1, which the tests' own output explains), the last lines
// of the guest console, where the kernel says why a process died.
func exitReport(kernel string, res *vm.Result) string {
	if res.ExitCode == 0 {
		return ""
	}
	how := ""
	if res.ExitCode > 128 && res.ExitCode < 128+65 {
		sig := syscall.Signal(res.ExitCode - 128)
		how = fmt.Sprintf(" (signal %d (%v))", int(sig), sig)
	}
	s := fmt.Sprintf("netctl-vm: kernel %s: the test binary ended with exit %d%s after %.1fs\n", kernel, res.ExitCode, how, res.Wall.Seconds())
	if res.ExitCode == 1 {
		return s
	}
	return s + strings.TrimPrefix(res.ConsoleTail(), "\n") + "\n"
}

// packageOptions reads the package's testdata/netctl-vm.conf, if there is
// one: a package whose VM tests need more than the defaults (a nested
// guest) says so there, one key=value a line: smp=N, mem=MiB,
// timeout=DURATION (at least this long), preload=MODULE[,MODULE] (on-demand
// modules loaded before the test binary: vm.RunOptions.Preload),
// retry=frozen (run the test binary once more in a new VM if its VM froze:
// for packages whose nested KVM guests are known to wedge the emulator
// now and then; elsewhere a freeze may be the code under test's lockup and
// fails at once). Anything else is an error.
func packageOptions(dir string, smp, mem *int, timeout *time.Duration, preload *[]string, retryFrozen *bool) error {
	p := filepath.Join(dir, "testdata", "netctl-vm.conf")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s, m, d, pre, rf := *smp, *mem, *timeout, *preload, *retryFrozen // assigned only if the whole file is good
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "smp", "mem":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 || (k == "smp" && n > 8) || (k == "mem" && (n < 256 || n > 8192)) {
				return fmt.Errorf("%s:%d: %s wants a number (smp 1-8, mem 256-8192 MiB), not %q", p, i+1, k, v)
			}
			if k == "smp" {
				s = n
			} else {
				m = n
			}
		case "timeout":
			t, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || t <= 0 {
				return fmt.Errorf("%s:%d: timeout wants a duration like 15m, not %q", p, i+1, v)
			}
			d = max(d, t)
		case "preload":
			for _, mod := range strings.Split(v, ",") {
				if mod = strings.TrimSpace(mod); mod == "" || strings.ContainsAny(mod, " /.") {
					return fmt.Errorf("%s:%d: preload wants module names like kvm_amd, not %q", p, i+1, v)
				}
				pre = append(pre, mod)
			}
		case "retry":
			if strings.TrimSpace(v) != "frozen" {
				return fmt.Errorf("%s:%d: retry knows only frozen (run the test binary again once if its VM froze), not %q", p, i+1, v)
			}
			rf = true
		default:
			return fmt.Errorf("%s:%d: unknown key %q (known: smp, mem, timeout, preload, retry)", p, i+1, k)
		}
	}
	*smp, *mem, *timeout, *preload, *retryFrozen = s, m, d, pre, rf
	return nil
}

// checkStatic refuses a dynamically linked binary: the guest has no C
// library, so it could not start.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked and the VM has no C library: build it with CGO_ENABLED=0", bin)
		}
	}
	return nil
}
