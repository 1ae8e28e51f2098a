package qemuproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// startQEMU starts a paused, device-less QEMU with 32 MiB (qemutest.Start)
// from the test goroutine, so that it runs in the test's namespaces, with
// cwd dir; it is killed when the test ends.
func startQEMU(t *testing.T, dir string, extra []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	return qemutest.Start(t, dir, extra, append([]string{"-m", "32"}, args...)...)
}

// waitSockets waits until every path exists (QEMU has bound them).
func waitSockets(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range paths {
		for {
			if _, err := os.Stat(p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("QEMU never bound %s", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func vmByPID(t *testing.T, vms []VM, pid int) VM {
	t.Helper()
	for _, vm := range vms {
		if vm.PID == pid {
			return vm
		}
	}
	t.Fatalf("List has no pid %d", pid)
	return VM{}
}

// TestHostFindAndDial runs four real QEMUs: "web1" with two -qmp monitors
// (one on a relative path) and a -chardev/-mon pair, named with
// guest=...,debug-threads=on and a doubled comma; a libvirt-like one whose
// monitor is a listening socket it inherited as fd 3; and two with the
// same name. List, Find, Resolve, Check and Dial must see each as it is:
// a held monitor is skipped, all held is ErrBusy within the greeting
// deadlines naming the holders, libvirt's is refused at once.
func TestHostFindAndDial(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	tag := os.Getpid()
	web1 := fmt.Sprintf("nctl-web1,x-%d", tag)
	a1, a2, a3 := filepath.Join(dir, "a1.sock"), filepath.Join(dir, "a2.sock"), filepath.Join(dir, "a3.sock")
	a := startQEMU(t, dir, nil, "-name", "guest="+strings.ReplaceAll(web1, ",", ",,")+",debug-threads=on",
		"-qmp", "unix:"+a1+",server=on,wait=off",
		"-qmp", "unix:a2.sock,server,nowait", // relative to QEMU's cwd, old boolean shorthand
		"-chardev", "socket,id=mon0,path="+a3+",server=on,wait=off", "-mon", "chardev=mon0,mode=control")

	lnFile := qemutest.ListenerFile(t, filepath.Join(dir, "libvirt-monitor.sock"))
	lvName := fmt.Sprintf("nctl-libvirt-%d", tag)
	lv := startQEMU(t, dir, []*os.File{lnFile}, "-name", "guest="+lvName+",debug-threads=on",
		"-chardev", "socket,id=charmonitor,fd=3,server=on,wait=off", "-mon", "chardev=charmonitor,id=monitor,mode=control")
	lnFile.Close()

	dupName := fmt.Sprintf("nctl-dup-%d", tag)
	d1, d2 := filepath.Join(dir, "d1.sock"), filepath.Join(dir, "d2.sock")
	dup1 := startQEMU(t, dir, nil, "-name", dupName, "-qmp", "unix:"+d1+",server=on,wait=off")
	dup2 := startQEMU(t, dir, nil, "-name", dupName, "-qmp", "unix:"+d2+",server=on,wait=off")
	waitSockets(t, a1, a2, a3, d1, d2)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// List: names, starttimes, monitors and where netctl reaches them.
	vms, err := List()
	if err != nil {
		t.Fatal(err)
	}
	va := vmByPID(t, vms, a.Process.Pid)
	if va.Name != web1 || va.StartTime == 0 {
		t.Errorf("web1: name %q starttime %d", va.Name, va.StartTime)
	}
	var socks []string
	for _, m := range va.Monitors {
		socks = append(socks, m.Socket)
	}
	if want := []string{a1, a2, a3}; !slices.Equal(socks, want) {
		t.Errorf("web1's monitor sockets %q, want %q (a2 through QEMU's cwd)", socks, want)
	}
	vlv := vmByPID(t, vms, lv.Process.Pid)
	if vlv.Name != lvName || len(vlv.Monitors) != 1 || !vlv.Monitors[0].Libvirt || vlv.Monitors[0].FD != "3" {
		t.Errorf("libvirt-like VM: %+v", vlv)
	}

	// Find.
	if vm, err := Find(web1); err != nil || vm.PID != a.Process.Pid {
		t.Errorf("Find(%q) = pid %d, %v", web1, vm.PID, err)
	}
	_, err = Find("nctl-nosuch")
	if !errors.Is(err, ErrNoVM) || !strings.Contains(err.Error(), fmt.Sprintf("%q (pid %d)", web1, a.Process.Pid)) {
		t.Errorf("Find(nctl-nosuch) = %v, want ErrNoVM listing %q", err, web1)
	}
	_, err = Find(dupName)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), fmt.Sprint(dup1.Process.Pid)) ||
		!strings.Contains(err.Error(), fmt.Sprint(dup2.Process.Pid)) || !strings.Contains(err.Error(), "--qmp") {
		t.Errorf("Find(%q) = %v, want ErrConflict with both pids", dupName, err)
	}

	// Resolve: --qmp picks one of the two same-named VMs.
	vd, err := Resolve(ctx, "", d2)
	if err != nil || vd.PID != dup2.Process.Pid || len(vd.Monitors) != 1 || vd.Monitors[0].Socket != d2 {
		t.Fatalf("Resolve(--qmp %s) = %+v, %v", d2, vd, err)
	}
	c, err := Dial(ctx, vd)
	if err != nil {
		t.Fatalf("Dial(dup2): %v", err)
	}
	var name struct{ Name string }
	if err := c.Run(ctx, "query-name", nil, &name); err != nil || name.Name != dupName {
		t.Errorf("query-name on dup2: %+v %v", name, err)
	}
	c.Close()
	if _, err := Resolve(ctx, web1, d2); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve with both: %v", err)
	}

	// Libvirt's monitor: refused at once, pointing to libvirt.
	start := time.Now()
	_, err = Dial(ctx, vlv)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "virsh attach-device") || time.Since(start) > time.Second {
		t.Errorf("Dial(libvirt-like) = %v after %v", err, time.Since(start))
	}
	if st, _ := Check(ctx, vlv, vlv.Monitors[0]); st != StateLibvirt {
		t.Errorf("Check(libvirt monitor) = %s", st)
	}

	// Hold a1 as another client would: Dial skips it for a2.
	held1, err := qmp.Dial(ctx, a1)
	if err != nil {
		t.Fatal(err)
	}
	defer held1.Close()
	start = time.Now()
	c2, err := Dial(ctx, va)
	if err != nil {
		t.Fatalf("Dial(web1) with a1 held: %v", err)
	}
	defer c2.Close()
	if pid, _ := c2.PeerPID(); pid != a.Process.Pid {
		t.Errorf("Dial reached pid %d", pid)
	}
	if d := time.Since(start); d > GreetingTimeout/2 {
		t.Errorf("Dial took %v: a1's holder is this process, which sock_diag shows without a connection", d)
	}
	// Hold a3 from another process (a user's socat, here python).
	py := exec.Command("python3", "-c", `import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(4096); print("held", flush=True); time.sleep(120)`, a3)
	out, _ := py.StdoutPipe()
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { py.Process.Kill(); py.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("python holder: %q %v", line, err)
	}
	if st, detail := Check(ctx, va, va.Monitors[2]); st != StateBusy || !strings.Contains(detail, fmt.Sprintf("pid %d (", py.Process.Pid)) {
		t.Errorf("Check(a3 held by python) = %s %q", st, detail)
	}
	// Every monitor held: ErrBusy, naming the holders, without waiting
	// for a greeting (the holders are known).
	start = time.Now()
	_, err = Dial(ctx, va)
	took := time.Since(start)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Dial(web1), all held: %v", err)
	}
	if took > GreetingTimeout {
		t.Errorf("Dial took %v with every monitor held", took)
	}
	for _, want := range []string{fmt.Sprintf("this process (pid %d)", os.Getpid()), fmt.Sprintf("pid %d (", py.Process.Pid)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("busy error does not name %q: %v", want, err)
		}
	}
	t.Logf("all held, after %v: %v", took, err)

	// Release a1: Dial gets it again.
	held1.Close()
	c1, err := Dial(ctx, va)
	if err != nil {
		t.Fatalf("Dial after a1 was released: %v", err)
	}
	c1.Close()
}

// TestHostResolveAndAbstract: a monitor defined in a -readconfig file is
// not on the command line, so Find's VM has none, but Resolve with
// --qmp asks the socket itself (SO_PEERCRED) and Dial reaches it; held,
// Resolve says busy. An abstract socket (abstract=on, given to -qmp as
// chardev:ID) is listed as "@NAME" and dialed. A VM found before its process was replaced is
// refused.
func TestHostResolveAndAbstract(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	tag := os.Getpid()
	rcSock := filepath.Join(dir, "rc.sock")
	cfg := filepath.Join(dir, "mon.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[chardev \"rc0\"]\n  backend = \"socket\"\n  path = \"%s\"\n  server = \"on\"\n  wait = \"off\"\n\n"+
		"[mon \"rcmon\"]\n  chardev = \"rc0\"\n  mode = \"control\"\n", rcSock)), 0o600); err != nil {
		t.Fatal(err)
	}
	rcName := fmt.Sprintf("nctl-readconfig-%d", tag)
	rc := startQEMU(t, dir, nil, "-name", rcName, "-readconfig", cfg)
	absName := fmt.Sprintf("nctl-abstract-%d", tag)
	abs := startQEMU(t, dir, nil, "-name", absName,
		"-chardev", fmt.Sprintf("socket,id=m,path=nctl-qmp-%d,abstract=on,server=on,wait=off", tag), "-qmp", "chardev:m")
	waitSockets(t, rcSock)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	found, err := Find(rcName)
	if err != nil || found.PID != rc.Process.Pid || len(found.Monitors) != 0 {
		t.Fatalf("Find(%q) = %+v, %v", rcName, found, err)
	}
	if _, err := Dial(ctx, found); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "-qmp unix:") {
		t.Errorf("Dial without a monitor on the command line: %v", err)
	}
	vm, err := Resolve(ctx, "", rcSock)
	if err != nil || vm.PID != rc.Process.Pid || vm.Name != rcName || vm.StartTime != found.StartTime || len(vm.Monitors) != 1 {
		t.Fatalf("Resolve(--qmp %s) = %+v, %v", rcSock, vm, err)
	}
	c, err := Dial(ctx, vm)
	if err != nil {
		t.Fatalf("Dial(resolved): %v", err)
	}
	if _, err := Resolve(ctx, "", rcSock); !errors.Is(err, ErrBusy) {
		t.Errorf("Resolve(--qmp) of a held socket: %v", err)
	}
	c.Close()
	stale := vm
	stale.StartTime++
	if _, err := Dial(ctx, stale); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("Dial(VM whose starttime changed): %v", err)
	}

	var va VM
	for va.PID == 0 {
		va, err = Find(absName)
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(va.Monitors) != 1 || va.Monitors[0].Socket != fmt.Sprintf("@nctl-qmp-%d", tag) {
		t.Fatalf("abstract monitor: %+v", va.Monitors)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := Dial(ctx, va)
		if err == nil {
			if pid, _ := c.PeerPID(); pid != abs.Process.Pid {
				t.Errorf("abstract: reached pid %d", pid)
			}
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Dial(abstract): %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostDialUnknownHolder: when no process can be named as the holder
// (here the client's socket is in flight in an SCM_RIGHTS message, in
// no process's fd table), the greeting deadline decides: Dial returns
// ErrBusy after GreetingTimeout, not a hang, and says "in use"; once the
// holder is gone the monitor answers again.
func TestHostDialUnknownHolder(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "q.sock")
	name := fmt.Sprintf("nctl-unknown-holder-%d", os.Getpid())
	startQEMU(t, dir, nil, "-name", name, "-qmp", "unix:"+sock+",server=on,wait=off")
	waitSockets(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vm, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the monitor, then move the holding socket into an SCM_RIGHTS
	// message nobody receives.
	held, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(held).ReadString('\n'); err != nil || !strings.Contains(line, `"QMP"`) {
		t.Fatalf("greeting %q, %v", line, err) // QEMU greets the client it accepted
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := held.File() // a dup of the holding socket
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	held.Close()
	if st, detail := Check(ctx, vm, vm.Monitors[0]); st != StateBusy || !strings.Contains(detail, "no greeting within") {
		t.Errorf("Check = %s %q", st, detail)
	}
	start := time.Now()
	_, err = Dial(ctx, vm)
	took := time.Since(start)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "in use by another client") {
		t.Errorf("Dial = %v", err)
	}
	if took < GreetingTimeout || took > GreetingTimeout+time.Second {
		t.Errorf("Dial took %v, want the greeting deadline %v", took, GreetingTimeout)
	}
	t.Logf("after %v: %v", took, err)
	// The message and its fd are freed with the pair: QEMU sees the
	// client go, drains the probes queued behind it, and greets again.
	unix.Close(pair[0])
	unix.Close(pair[1])
	c, err := Dial(ctx, vm)
	if err != nil {
		t.Fatalf("Dial once the holder is gone: %v", err)
	}
	c.Close()
}

// TestHostChroot: QEMU binds its sockets before it applies -chroot (which
// also moves its cwd), as QEMU 7.2 does: /proc/PID/root and cwd then
// point into the jail, so an absolute path is taken as it was given and
// a relative one is marked unusable, saying to pass --qmp.
func TestHostChroot(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	jail := filepath.Join(dir, "jail")
	if err := os.Mkdir(jail, 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(jail, "q.sock")
	name := fmt.Sprintf("nctl-chroot-%d", os.Getpid())
	q := startQEMU(t, dir, nil, "-name", name, "-chroot", jail,
		"-qmp", "unix:rel.sock,server=on,wait=off", "-qmp", "unix:"+abs+",server=on,wait=off")
	waitSockets(t, abs, filepath.Join(dir, "rel.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadline := time.Now().Add(20 * time.Second)
	for { // wait until QEMU has chrooted: its root is the jail
		if r, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", q.Process.Pid)); r == jail {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("QEMU never chrooted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	vm, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(vm.Monitors) != 2 || !strings.Contains(vm.Monitors[0].Unusable, "--qmp") || vm.Monitors[1].Socket != abs {
		t.Fatalf("monitors: %+v", vm.Monitors)
	}
	c, err := Dial(ctx, vm)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
	// --qmp with the relative socket's full path works.
	rvm, err := Resolve(ctx, "", filepath.Join(dir, "rel.sock"))
	if err != nil || rvm.PID != q.Process.Pid {
		t.Fatalf("Resolve(--qmp rel.sock's full path) = %+v, %v", rvm, err)
	}
	if c, err = Dial(ctx, rvm); err != nil {
		t.Fatalf("Dial(--qmp rel.sock): %v", err)
	}
	c.Close()
}

// TestHostOtherMountNamespace: a QEMU in a mount namespace of its own (as
// in a container) whose socket directory is a tmpfs only it sees: the
// socket is reached through /proc/PID/root.
func TestHostOtherMountNamespace(t *testing.T) {
	testenv.Host(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(private, "q.sock")
	name := fmt.Sprintf("nctl-mntns-%d", os.Getpid())
	cmd := exec.Command("sh", "-c", `mount -t tmpfs netctl-test "$1" && exec "$2" -S -nodefaults -machine none -display none -name "$3" -qmp "unix:$1/q.sock,server=on,wait=off"`,
		"sh", private, qemu, name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := fmt.Sprintf("/proc/%d/root%s", cmd.Process.Pid, sock)
	deadline := time.Now().Add(20 * time.Second)
	var vm VM
	for {
		vm, err = Find(name)
		if err == nil && len(vm.Monitors) == 1 {
			if _, err := os.Stat(want); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU in its own mount namespace never came up: %+v %v; %s", vm, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("the socket is visible from the test's mount namespace: the test checks nothing")
	}
	if got := vm.Monitors[0].Socket; got != want {
		t.Errorf("Socket = %q, want %q", got, want)
	}
	c, err := Dial(ctx, vm)
	if err != nil {
		t.Fatalf("Dial through /proc/PID/root: %v", err)
	}
	c.Close()
}

// TestHostStoppedQEMU: a QEMU stopped with SIGSTOP greets no one, but no
// client holds its monitor either: Dial says it is stopped and how to
// resume it (ErrNotAvailable, not ErrBusy) after the greeting deadline;
// resumed, it answers.
func TestHostStoppedQEMU(t *testing.T) {
	testenv.Host(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "q.sock")
	name := fmt.Sprintf("nctl-stopped-%d", os.Getpid())
	q := startQEMU(t, dir, nil, "-name", name, "-qmp", "unix:"+sock+",server=on,wait=off")
	waitSockets(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vm, err := Find(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer q.Process.Signal(syscall.SIGCONT)
	for processState(q.Process.Pid) != 'T' {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err = Dial(ctx, vm)
	took := time.Since(start)
	if !errors.Is(err, ErrNotAvailable) || errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("kill -CONT %d", q.Process.Pid)) {
		t.Errorf("Dial(stopped QEMU) = %v", err)
	}
	if took > GreetingTimeout+time.Second {
		t.Errorf("Dial took %v", took)
	}
	if st, detail := Check(ctx, vm, vm.Monitors[0]); st != StateError || !strings.Contains(detail, "stopped") {
		t.Errorf("Check(stopped QEMU) = %s %q", st, detail)
	}
	t.Logf("after %v: %v", took, err)
	q.Process.Signal(syscall.SIGCONT)
	c, err := Dial(ctx, vm)
	if err != nil {
		t.Fatalf("Dial once resumed: %v", err)
	}
	c.Close()
}
