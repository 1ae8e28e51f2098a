package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/vm"
)

// Options say how to boot the guest.
type Options struct {
	// Kernel is the test/vm kernel to boot: "6.12" (the default) or "6.1".
	Kernel string
	// Paused starts QEMU with -S: the guest boots only after the QMP
	// command cont. Boot then returns as soon as QMP answers; call
	// WaitReady after cont.
	Paused bool
	// Machine is "pc" (the default: i440FX, ACPI PCI hotplug on the root
	// bus) or "q35" (hotplug into pcie-root-port devices; see RootPorts).
	Machine string
	// RootPorts is how many empty pcie-root-port devices a q35 guest gets
	// (ids RootPortID(0), RootPortID(1), ...), one per NIC to hotplug;
	// default 2. Ignored on pc.
	RootPorts int
	// SMP is the number of vCPUs (default 1). The guest's virtio-net
	// driver turns on min(queue pairs, online CPUs) queue pairs, and only
	// those show in /sys/class/net/IF/queues: a test of 4 queues needs 4.
	SMP   int
	MemMB int // default 512
	// Lifetime bounds the whole run; QEMU is killed after it (default 10
	// minutes).
	Lifetime time.Duration
	// Log gets the guest's agent output as it runs (default: discarded;
	// it is kept and shown in errors either way).
	Log io.Writer
	// QEMUArgs are appended to QEMU's command line.
	QEMUArgs []string
}

// RootPortID is the id of the i-th pcie-root-port of a q35 guest: the bus
// to name in device_add.
func RootPortID(i int) string { return "rp" + strconv.Itoa(i) }

// Guest is a running QEMU with a booted Linux guest and its agent. Its
// methods are safe for concurrent use (commands run one at a time in the
// guest). Close it on every path.
type Guest struct {
	dir, sock string
	img       *vm.Image
	started   time.Time
	cancel    context.CancelFunc
	done      chan struct{} // closed when QEMU has exited
	res       *vm.Result
	runErr    error
	out       *syncBuffer

	mu  sync.Mutex // guards seq, and serialises Exec
	seq int

	bootMu sync.Mutex    // guards boot
	boot   time.Duration // QEMU start to agent ready, set by WaitReady

	closeOnce sync.Once
	closeErr  error
}

// Boot starts QEMU with Debian's kernel, the harness's busybox initramfs
// and the agent, in the calling thread's network namespace: call it from
// the test goroutine after testenv.Host, so that QEMU (and anything it
// opens by name) lives in the test's namespace. Without Paused it returns
// once the agent answers; with Paused, once QMP answers. The QMP socket
// takes one client at a time: close yours before Close. On error nothing
// is left running.
func Boot(ctx context.Context, opts Options) (*Guest, error) {
	if opts.Kernel == "" {
		opts.Kernel = "6.12"
	}
	switch opts.Machine {
	case "", "pc":
		opts.Machine = "pc"
	case "q35":
		if opts.RootPorts == 0 {
			opts.RootPorts = 2
		}
	default:
		return nil, fmt.Errorf("guest: machine %q: use pc or q35: %w", opts.Machine, errs.ErrInvalid)
	}
	if opts.RootPorts < 0 || opts.RootPorts > 30 {
		return nil, fmt.Errorf("guest: %d root ports: use 0 to 30: %w", opts.RootPorts, errs.ErrInvalid)
	}
	if opts.MemMB == 0 {
		opts.MemMB = 512
	}
	if opts.Lifetime == 0 {
		opts.Lifetime = 10 * time.Minute
	}
	k, err := vm.LookupKernel(opts.Kernel)
	if err != nil {
		return nil, fmt.Errorf("guest: %w: %w", err, errs.ErrInvalid)
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	img, err := vm.Prepare(ctx, cache, k, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("guest: the %s image (run make vm-prepare): %w", opts.Kernel, err)
	}
	dir, err := os.MkdirTemp("", "netctl-guest-")
	if err != nil {
		return nil, err
	}
	// The share and the socket: short paths (a unix socket path has 108 bytes).
	share := filepath.Join(dir, "a")
	if err := os.Mkdir(share, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	g := &Guest{dir: dir, sock: filepath.Join(dir, "qmp.sock"), img: img, done: make(chan struct{}), out: &syncBuffer{}}
	var log io.Writer = g.out
	if opts.Log != nil {
		log = io.MultiWriter(g.out, opts.Log)
	}
	args := []string{"-qmp", "unix:" + g.sock + ",server=on,wait=off"}
	if opts.Paused {
		args = append(args, "-S")
	}
	if opts.Machine == "q35" {
		// A second -machine merges into the harness's "-machine pc": the
		// type becomes q35.
		args = append(args, "-machine", "q35")
		for i := 0; i < opts.RootPorts; i++ {
			args = append(args, "-device", fmt.Sprintf("pcie-root-port,id=%s,bus=pcie.0,chassis=%d,slot=%d", RootPortID(i), i+1, i+1))
		}
	}
	args = append(args, opts.QEMUArgs...)
	runCtx, cancel := context.WithTimeout(context.Background(), opts.Lifetime+time.Minute)
	g.cancel = cancel
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	g.started = time.Now()
	started := make(chan error, 1)
	go func() {
		defer close(g.done)
		// This goroutine's thread joins the caller's network namespace
		// and is never unlocked: it ends with the goroutine.
		runtime.LockOSThread()
		err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
		ns.Close()
		started <- err
		if err != nil {
			return
		}
		g.res, g.runErr = img.Run(runCtx, vm.RunOptions{
			Script:   agentScript,
			Shares:   []vm.Share{{HostPath: share, GuestPath: guestDir}},
			Timeout:  opts.Lifetime,
			SMP:      opts.SMP,
			MemMB:    opts.MemMB,
			Stdout:   log,
			QEMUArgs: args,
		})
	}()
	if err := <-started; err != nil {
		cancel()
		<-g.done
		os.RemoveAll(dir)
		return nil, fmt.Errorf("guest: setns into the caller's network namespace: %w", err)
	}
	if opts.Paused {
		err = g.waitQMP(ctx)
	} else {
		err = g.WaitReady(ctx)
	}
	if err != nil {
		g.kill()
		return nil, err
	}
	return g, nil
}

// QMP is the path of QEMU's QMP socket (one client at a time).
func (g *Guest) QMP() string { return g.sock }

// Dir is the host directory the guest's files live in (removed by Close).
func (g *Guest) Dir() string { return g.dir }

// BootTime is how long the guest took from QEMU's start (including the
// wait for a VM slot, and any time paused) to its agent's first answer;
// zero before that.
func (g *Guest) BootTime() time.Duration {
	g.bootMu.Lock()
	defer g.bootMu.Unlock()
	return g.boot
}

// Output is what the guest's agent printed so far.
func (g *Guest) Output() string { return g.out.String() }

// waitQMP waits until QEMU's QMP socket completes a handshake, then lets
// it go again for the caller.
func (g *Guest) waitQMP(ctx context.Context) error {
	for {
		c, err := qmp.Dial(ctx, g.sock)
		if err == nil {
			return c.Close()
		}
		if err := g.wait(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("guest: QMP %s never answered: %w", g.sock, err)
		}
	}
}

// WaitReady waits for the agent (after cont, for a paused guest).
func (g *Guest) WaitReady(ctx context.Context) error {
	ready := filepath.Join(g.dir, "a", "ready")
	for {
		if _, err := os.Stat(ready); err == nil {
			g.bootMu.Lock()
			if g.boot == 0 {
				g.boot = time.Since(g.started)
			}
			g.bootMu.Unlock()
			return nil
		}
		if err := g.wait(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("guest: the agent never started: %w", err)
		}
	}
}

// wait sleeps d, or fails when ctx ends or QEMU has exited.
func (g *Guest) wait(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w\n%s", ctx.Err(), g.tail())
	case <-g.done:
		return g.exited()
	case <-time.After(d):
		return nil
	}
}

// exited describes how the guest ended; call only after done is closed.
func (g *Guest) exited() error {
	if g.runErr != nil {
		return fmt.Errorf("the guest ended: %w\n%s", g.runErr, g.tail())
	}
	if g.res == nil {
		return errors.New("the guest never started")
	}
	return fmt.Errorf("the guest ended with status %d\n%s", g.res.ExitCode, g.tail())
}

// tail is the agent's output and the end of the console, for errors.
func (g *Guest) tail() string {
	s := "guest agent output:\n" + lastLines(g.out.String(), 20)
	select {
	case <-g.done:
		if g.res != nil {
			s += "\nconsole:\n" + lastLines(g.res.Console, 30)
		}
	default:
	}
	return s
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// Exec runs cmd with busybox sh in the guest, as root, and returns its
// output (stdout and stderr together) and exit status. The error is
// non-nil only when no status came back (ctx ended, the guest died); a
// command still running when ctx ends keeps running in the guest, and the
// next Exec waits behind it.
func (g *Guest) Exec(ctx context.Context, cmd string) (string, int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
		return "", -1, fmt.Errorf("guest: exec: %w", g.exited())
	default:
	}
	g.seq++
	n := fmt.Sprintf("%06d", g.seq)
	a := filepath.Join(g.dir, "a")
	tmp := filepath.Join(a, "cmd", "."+n+".tmp")
	if err := os.WriteFile(tmp, []byte(cmd+"\n"), 0o644); err != nil {
		return "", -1, fmt.Errorf("guest: exec: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(a, "cmd", n+".sh")); err != nil {
		return "", -1, fmt.Errorf("guest: exec: %w", err)
	}
	rcPath, outPath := filepath.Join(a, "out", n+".rc"), filepath.Join(a, "out", n+".out")
	for {
		if b, err := readBounded(rcPath, 32); err == nil {
			rc, err := strconv.Atoi(strings.TrimSpace(b))
			if err != nil {
				return "", -1, fmt.Errorf("guest: exec: bad status %q", b)
			}
			out, err := readBounded(outPath, 1<<20)
			os.Remove(rcPath)
			os.Remove(outPath)
			return out, rc, err
		}
		if err := g.wait(ctx, 10*time.Millisecond); err != nil {
			return "", -1, fmt.Errorf("guest: exec %q: %w", firstLine(cmd), err)
		}
	}
}

// readBounded reads at most max bytes of path: a command's output is the
// guest's, and a runaway one must not fill the test's memory.
func readBounded(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	return string(b), err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Close powers the guest off (the agent stops and the harness's init
// powers off), waits for QEMU to exit, and removes the guest's files. A
// guest that does not stop within 30 s, or never booted (paused), is
// killed. The error says whether the guest ended badly. Closing twice
// returns the first result.
func (g *Guest) Close() error {
	g.closeOnce.Do(func() {
		a := filepath.Join(g.dir, "a")
		if _, err := os.Stat(filepath.Join(a, "ready")); err == nil {
			os.WriteFile(filepath.Join(a, "stop"), nil, 0o644)
			select {
			case <-g.done:
			case <-time.After(30 * time.Second):
				g.closeErr = fmt.Errorf("guest: did not power off within 30 s; killed\n%s", g.tail())
			}
		}
		g.kill()
		if g.closeErr == nil && g.runErr != nil && !errors.Is(g.runErr, context.Canceled) {
			g.closeErr = fmt.Errorf("guest: %w", g.exited())
		} else if g.closeErr == nil && g.res != nil && g.res.ExitCode != 0 {
			g.closeErr = fmt.Errorf("guest: %w", g.exited())
		}
	})
	return g.closeErr
}

// kill ends QEMU (if still running), waits for it and removes the files.
func (g *Guest) kill() {
	g.cancel()
	<-g.done
	os.RemoveAll(g.dir)
}

// syncBuffer is a bytes.Buffer safe for one writer and other readers,
// bounded: it keeps the last 1 MiB.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if over := s.b.Len() - 1<<20; over > 0 {
		s.b.Next(over)
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
