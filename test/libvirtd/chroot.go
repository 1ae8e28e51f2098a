package libvirtd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/test/l2"
)

// Chrooted is a real libvirtd of a VM test (test/vm): the host's libvirt,
// chrooted in l2.Root (L1's /dev, /proc and /sys bound in, a tmpfs on its
// /run: l2.Chroot), with an empty tmpfs of the test's over each directory
// it writes (Dirs, and /var/log as a whole, for a hook's log too). The
// host's files are a read-only share and this VM has no overlayfs, so
// nothing depends on what a libvirtd that ran on the host left there (a
// fresh host has no /etc/libvirt/secrets, which libvirtd's secret driver
// must create), and the host's own configuration is not read: the daemon
// runs on libvirt's defaults and Seed's qemu.conf.
//
// Paths inside the chroot are l2.Root-relative: a file the test writes at
// l2.Root+P is P to libvirtd and its QEMUs. The chroot's /dev is L1's, so
// a /dev/vhost-net or /dev/vhost-vdpa-N libvirt opens is L1's device, and
// the daemon shares L1's network namespace (its taps are L1's).
type Chrooted struct {
	// Sock is libvirtd's socket as L1 sees it; URI names it for
	// libvirtdom.Dial (and netctl's --libvirt).
	Sock string
	URI  string

	t    *testing.T
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

// NewChrooted prepares the chroot and the daemon's private directories
// (unmounted when t ends), without starting anything: install hooks
// under l2.Root+"/etc/libvirt/hooks", then call Start.
func NewChrooted(t *testing.T) *Chrooted {
	t.Helper()
	if err := l2.Chroot(); err != nil {
		t.Fatal(err)
	}
	var mounted []string
	for _, d := range append([]string{"/var/log"}, Dirs...) {
		under := false
		for _, m := range mounted {
			under = under || strings.HasPrefix(d, m+"/")
		}
		p := l2.Root + d
		if under {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "mode=0755"); err != nil {
			t.Fatalf("tmpfs on %s: %v (the host's libvirt-daemon-system makes the directory)", p, err)
		}
		mounted = append(mounted, d)
		t.Cleanup(func() { unix.Unmount(p, unix.MNT_DETACH) })
	}
	if err := Seed(l2.Root + "/etc/libvirt"); err != nil {
		t.Fatal(err)
	}
	sock := l2.Root + "/run/libvirt/libvirt-sock"
	return &Chrooted{t: t, Sock: sock, URI: "qemu+unix:///system?socket=" + sock}
}

// ChrootRun runs a host binary (an absolute path) in l2.Root with a clean
// environment (as libvirtd's own hooks get) plus env, returning its
// combined output.
func ChrootRun(ctx context.Context, stdin []byte, env []string, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{l2.Root, bin}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}, env...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Log is libvirtd's log so far.
func (d *Chrooted) Log() string {
	b, _ := os.ReadFile(l2.Root + "/var/log/libvirt/libvirtd.log")
	return string(b)
}

// Virsh runs virsh in the chroot against the daemon (combined output).
func (d *Chrooted) Virsh(ctx context.Context, args ...string) (string, error) {
	return ChrootRun(ctx, nil, nil, "/usr/bin/virsh", append([]string{"-c", "qemu:///system"}, args...)...)
}

// Start starts virtlogd (-d) and libvirtd (in the foreground, a child of
// the test: if it exits, its drivers having failed to initialise, Start
// says so at once instead of waiting for an answer that cannot come) and
// waits until virsh answers. When t ends, every running domain is
// destroyed and both daemons are stopped (libvirtd's output and log are
// logged if t failed).
func (d *Chrooted) Start(ctx context.Context) error {
	t := d.t
	if out, err := ChrootRun(ctx, nil, nil, "/usr/sbin/virtlogd", "-d"); err != nil {
		return fmt.Errorf("virtlogd -d: %w\n%s", err, out)
	}
	t.Cleanup(func() { killPidFile(t, l2.Root+"/run/virtlogd.pid") })
	start := time.Now()
	d.cmd = exec.Command("chroot", l2.Root, "/usr/sbin/libvirtd")
	d.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C",
		"LIBVIRT_LOG_OUTPUTS=1:file:/var/log/libvirt/libvirtd.log", "LIBVIRT_LOG_FILTERS=1:util.hook 3:*"}
	d.cmd.Dir = "/"
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("libvirtd: %w", err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	for {
		out, err := d.Virsh(ctx, "version")
		if err == nil {
			t.Logf("libvirtd answered after %v: %s", time.Since(start).Round(time.Second), strings.Join(strings.Fields(out), " "))
			return nil
		}
		select {
		case werr := <-d.done:
			d.done <- werr // for the cleanup
			return fmt.Errorf("libvirtd exited before it answered (%v), after %v", werr, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			return fmt.Errorf("libvirtd did not answer: %v\n%s", err, out)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop destroys the running domains and stops libvirtd.
func (d *Chrooted) stop() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := d.Virsh(ctx, "list", "--name"); err == nil {
		for _, n := range strings.Fields(out) {
			d.Virsh(ctx, "destroy", n)
		}
	}
	d.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		t.Errorf("libvirtd ignored SIGTERM for 10 s and was killed")
	}
	if t.Failed() {
		t.Logf("libvirtd's output:\n%s\nlibvirtd's log:\n%s", d.out.String(), d.Log())
	}
}

// killPidFile stops the daemon whose pid file is p and waits for it.
func killPidFile(t *testing.T, p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 1 {
		return
	}
	unix.Kill(pid, unix.SIGTERM)
	for i := 0; i < 100; i++ {
		if unix.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%s: pid %d still running after SIGTERM", p, pid)
}
