package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// URI is the connection URI of a test's daemon (qemu:///system through its
// private socket).
const URI = "qemu:///system"

// Daemon is a running libvirtd and virtlogd of one host test. It is not
// safe for concurrent use; call its methods from the test goroutine, whose
// thread is in the test's namespaces.
type Daemon struct {
	// Dir is the test's private tree (under os.TempDir(), mode 0755).
	Dir string
	// HookDir is where libvirtd looks for hooks, /etc/libvirt/hooks, as the
	// test sees it (a bind of Dir/hooks).
	HookDir string
	// Log is libvirtd's own log file (hook failures are logged there).
	Log string

	t        testing.TB
	mounts   []string // mounted by New and Private, in order
	made     []string // mount points New and Private made on the machine
	machine  []machineDir
	virtlogd *exec.Cmd
	libvirtd *exec.Cmd
}

// machineDir is one of Dirs as the machine has it, opened before the
// test's copy covered it: at cleanup, nothing may have appeared in it.
type machineDir struct {
	path   string
	f      *os.File
	before map[string]bool
}

// New makes the test's private libvirt tree and mounts it, without
// starting anything: install hooks into d.HookDir, then call d.Start. Call
// it from the test goroutine after testenv.Host; it fails the test where
// libvirt is not installed (make vm-deps installs it).
func New(t testing.TB) *Daemon {
	t.Helper()
	for _, b := range []string{"libvirtd", "virtlogd", "virsh"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("libvirtd: %s not found: run test/host-deps.sh (make vm-deps) to install libvirt-daemon-system and libvirt-clients", b)
		}
	}
	dir, err := os.MkdirTemp("", "netctl-libvirtd-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Dir: dir, HookDir: "/etc/libvirt/hooks", t: t}
	t.Cleanup(d.cleanup)
	if err := os.Chmod(dir, 0o755); err != nil { // QEMU, as libvirt-qemu, reads the guest's files under it
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatalf("libvirtd: a private /run (after testenv.Host): %v", err)
	}
	d.mounts = append(d.mounts, "/run")
	// Every directory libvirtd writes is the test's own (Dirs): nothing
	// it needs comes from an earlier libvirtd on the machine, and nothing
	// it writes reaches the machine.
	for _, p := range Dirs {
		src := filepath.Join(dir, strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
		if err := os.Mkdir(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); os.IsNotExist(err) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatalf("libvirtd: mount point %s: %v", p, err)
			}
			d.made = append(d.made, p)
		}
		if f, err := os.Open(p); err == nil {
			names, _ := f.Readdirnames(-1)
			m := machineDir{path: p, f: f, before: map[string]bool{}}
			for _, n := range names {
				m.before[n] = true
			}
			d.machine = append(d.machine, m)
		}
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("libvirtd: bind %s on %s: %v", src, p, err)
		}
		d.mounts = append(d.mounts, p)
	}
	if err := Seed("/etc/libvirt"); err != nil {
		t.Fatal(err)
	}
	// Hide /dev/kvm from libvirt-qemu where it exists: on these machines
	// it is there but QEMU cannot use it, so libvirt 9.0 finds KVM
	// "usable" (the node opens) while its probe of QEMU says no KVM, judges
	// its capabilities cache stale at every lookup and probes each QEMU
	// binary again, twice: 52 s for one virsh create. A root-only file in
	// its place (in the test's mount namespace only) makes KVM unusable to
	// libvirt and the cache hold. The domains are type='qemu' (TCG) anyway.
	if _, err := os.Stat("/dev/kvm"); err == nil {
		nokvm := filepath.Join(dir, "nokvm")
		if err := os.WriteFile(nokvm, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(nokvm, "/dev/kvm", "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("libvirtd: hide /dev/kvm: %v", err)
		}
		d.mounts = append(d.mounts, "/dev/kvm")
	}
	d.Log = "/var/log/libvirt/libvirtd.log"
	return d
}

// Start starts virtlogd and libvirtd in the test's namespaces and waits
// until virsh answers (up to 90 s: a first start probes QEMU). Hooks must
// be in HookDir already.
func (d *Daemon) Start(ctx context.Context) error {
	// Their stderr goes to a file: a pipe would stay open in what they spawn.
	stderr, err := os.Create(filepath.Join(d.Dir, "daemons.stderr"))
	if err != nil {
		return err
	}
	defer stderr.Close()
	d.virtlogd = exec.Command("virtlogd", "--pid-file", "/run/virtlogd.pid")
	d.virtlogd.Env = d.env()
	d.virtlogd.Stdout, d.virtlogd.Stderr = stderr, stderr
	if err := d.virtlogd.Start(); err != nil {
		return fmt.Errorf("libvirtd: start virtlogd: %w", err)
	}
	return d.startLibvirtd(ctx, stderr, "start")
}

// RestartLibvirtd stops libvirtd (SIGTERM) and starts it again, leaving
// virtlogd and the running domains' QEMUs: the new libvirtd reconnects to
// each domain, running the qemu hook's "reconnect begin" for it (and
// killing the domain if the hook fails). It waits until virsh answers.
func (d *Daemon) RestartLibvirtd(ctx context.Context) error {
	if err := stop(d.libvirtd); err != nil {
		return fmt.Errorf("libvirtd: restart: %w", err)
	}
	stderr, err := os.OpenFile(filepath.Join(d.Dir, "daemons.stderr"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	return d.startLibvirtd(ctx, stderr, "restart")
}

// env is the daemons' environment.
func (d *Daemon) env() []string {
	return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
		"LIBVIRT_LOG_OUTPUTS=1:file:" + d.Log, "LIBVIRT_LOG_FILTERS=1:util.hook 1:util.command 3:*"}
}

// startLibvirtd starts libvirtd with its output on stderr and waits up
// to 90 s until virsh answers (a first start probes QEMU).
func (d *Daemon) startLibvirtd(ctx context.Context, stderr *os.File, what string) error {
	d.libvirtd = exec.Command("libvirtd", "--pid-file", "/run/libvirtd.pid")
	d.libvirtd.Env = d.env()
	d.libvirtd.Stdout, d.libvirtd.Stderr = stderr, stderr
	if err := d.libvirtd.Start(); err != nil {
		return fmt.Errorf("libvirtd: %s libvirtd: %w", what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		if _, err := d.Virsh("version"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("libvirtd: no answer from virsh within 90 s of its %s (see %s and %s): %w", what, stderr.Name(), d.Log, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Virsh runs virsh against the test's daemon and returns its combined
// output; a non-zero exit is an error that carries the output (virsh's
// "error: ..." lines).
func (d *Daemon) Virsh(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-c", URI}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Running lists the names of the running domains.
func (d *Daemon) Running() ([]string, error) {
	out, err := d.Virsh("list", "--name")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// stop ends one of the daemons: SIGTERM, and SIGKILL after 10 s.
func stop(cmd *exec.Cmd) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() <= 0 { // ended by the signal
			return nil
		}
		return err
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s ignored SIGTERM for 10 s and was killed", cmd.Path)
	}
}

func (d *Daemon) cleanup() {
	t := d.t
	if d.libvirtd != nil && d.libvirtd.Process != nil {
		if names, err := d.Running(); err == nil {
			for _, n := range names {
				if _, err := d.Virsh("destroy", n); err != nil {
					t.Errorf("libvirtd cleanup: %v", err)
				}
			}
		} else {
			t.Errorf("libvirtd cleanup: %v", err)
		}
	}
	if err := stop(d.libvirtd); err != nil {
		t.Errorf("libvirtd cleanup: libvirtd: %v", err)
	}
	if err := stop(d.virtlogd); err != nil {
		t.Errorf("libvirtd cleanup: virtlogd: %v", err)
	}
	// A domain's QEMU outlives its libvirtd when destroy failed or the
	// daemon died: find those of this daemon (their command lines name
	// its directory), kill them and say so.
	for _, pid := range qemusUnder(d.Dir) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("libvirtd cleanup: QEMU pid %d of this test's libvirtd was still running: killed", pid)
	}
	if t.Failed() || os.Getenv("NETCTL_LIBVIRTD_KEEP") == "1" {
		// Keep the logs past the unmount: libvirtd's, virtlogd's and QEMU's.
		keep := filepath.Join(os.TempDir(), filepath.Base(d.Dir)+"-logs")
		if err := exec.Command("cp", "-a", "/var/log/libvirt", keep).Run(); err == nil {
			t.Logf("libvirt logs kept in %s", keep)
		}
		if b, err := os.ReadFile(d.Log); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("libvirtd log (last lines):\n%s", strings.Join(lines, "\n"))
		}
	}
	d.checkMachine()
	for i := len(d.mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(d.mounts[i], unix.MNT_DETACH); err != nil {
			t.Errorf("libvirtd cleanup: unmount %s: %v", d.mounts[i], err)
		}
	}
	for i := len(d.made) - 1; i >= 0; i-- {
		if err := os.Remove(d.made[i]); err != nil {
			t.Errorf("libvirtd cleanup: %v", err)
		}
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		t.Errorf("libvirtd cleanup: %v", err)
	}
}

// checkMachine fails the test if anything appeared in one of the
// machine's Dirs while the test's copies covered them (libvirtd wrote
// past its private tree), and closes them.
func (d *Daemon) checkMachine() {
	for _, m := range d.machine {
		var added []string
		if _, err := m.f.Seek(0, 0); err == nil {
			names, _ := m.f.Readdirnames(-1)
			for _, n := range names {
				if !m.before[n] {
					added = append(added, n)
				}
			}
		}
		m.f.Close()
		if len(added) > 0 {
			d.t.Errorf("libvirtd cleanup: %v appeared in the machine's %s while the test's own copy covered it", added, m.path)
		}
	}
	d.machine = nil
}

// Private gives the test its own empty directory at path (a bind of a
// directory under Dir, in the test's mount namespace), for files a hook
// reads or writes at fixed paths (/etc/netctl, /var/log/netctl). Where
// path does not exist on the machine, the empty mount point is made and
// removed again at cleanup. Call it before Start.
func (d *Daemon) Private(path string) error {
	src := filepath.Join(d.Dir, "private", strings.ReplaceAll(strings.Trim(path, "/"), "/", "_"))
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if err := os.Mkdir(path, 0o755); err != nil {
			return fmt.Errorf("libvirtd: mount point %s: %w", path, err)
		}
		d.made = append(d.made, path)
	}
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("libvirtd: bind %s on %s: %w", src, path, err)
	}
	d.mounts = append(d.mounts, path)
	return nil
}

// qemusUnder lists the QEMU processes whose command line names dir.
func qemusUnder(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if strings.Contains(filepath.Base(argv[0]), "qemu-system") && strings.Contains(string(b), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}
