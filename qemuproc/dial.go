package qemuproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/qmp"
)

// GreetingTimeout bounds the wait for QEMU's greeting on a monitor. QEMU
// serves one client per monitor: a second connection is queued by the
// kernel (connect succeeds) but QEMU says nothing until the first client
// leaves, so silence past this deadline means "busy".
const GreetingTimeout = 2 * time.Second

// libvirtAdvice is what to do with a VM that libvirt runs.
const libvirtAdvice = "attach through libvirt instead: the netctl libvirt hook (netctl hook) or virsh attach-device"

// Find returns the one running QEMU whose -name is name and that netctl
// trusts (DefaultTrust; Trust.Check). No such VM is ErrNoVM (also
// ErrNotAvailable), with the names that exist and the candidates passed
// by as untrusted, each with why; two or more trusted ones is
// ErrConflict, with their PIDs (name the socket with --qmp instead).
// Untrusted candidates never count: a process anyone can start with
// argv[0] qemu-system-* and -name NAME neither receives what netctl
// hands the VM nor makes the name ambiguous.
func Find(name string) (VM, error) {
	if name == "" {
		return VM{}, fmt.Errorf("qemuproc: empty VM name: name the VM as QEMU's -name does, or pass --qmp SOCKET: %w", ErrInvalid)
	}
	trust, err := DefaultTrust()
	if err != nil {
		return VM{}, err
	}
	vms, err := List()
	if err != nil {
		return VM{}, err
	}
	return pickTrusted(vms, name, func(vm VM) error { return trust.Check(vm.PID, vm.StartTime) })
}

// pick is Find's choice among vms, all trusted.
func pick(vms []VM, name string) (VM, error) {
	return pickTrusted(vms, name, func(VM) error { return nil })
}

// pickTrusted is Find's choice among vms; check says why a VM is not
// trusted.
func pickTrusted(vms []VM, name string, check func(VM) error) (VM, error) {
	var found []VM
	var names, passed []string
	for _, vm := range vms {
		if vm.Name == name {
			if err := check(vm); err != nil {
				why := err.Error()
				var ue *UntrustedError
				if errors.As(err, &ue) {
					why = ue.Why
				}
				passed = append(passed, fmt.Sprintf("pid %d %s", vm.PID, why))
				continue
			}
			found = append(found, vm)
		}
		if vm.Name != "" {
			names = append(names, fmt.Sprintf("%q (pid %d)", vm.Name, vm.PID))
		} else {
			names = append(names, fmt.Sprintf("unnamed (pid %d)", vm.PID))
		}
	}
	passedBy := ""
	if len(passed) > 0 {
		passedBy = fmt.Sprintf("; passed by %d process(es) named %q that netctl does not trust: %s", len(passed), name, strings.Join(passed, "; "))
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		pids := make([]string, len(found))
		for i, vm := range found {
			pids[i] = fmt.Sprint(vm.PID)
		}
		return VM{}, fmt.Errorf("qemuproc: %d QEMU processes are named %q (pids %s): name the monitor socket with --qmp SOCKET%s: %w",
			len(found), name, strings.Join(pids, ", "), passedBy, ErrConflict)
	case len(vms) == 0:
		return VM{}, fmt.Errorf("qemuproc: no VM named %q: no QEMU (qemu-system-*, qemu-kvm) is running: %w", name, ErrNoVM)
	}
	return VM{}, fmt.Errorf("qemuproc: no VM named %q; running: %s (netctl vm list shows them)%s: %w", name, strings.Join(names, ", "), passedBy, ErrNoVM)
}

// Resolve finds the VM that the CLI's --vm NAME or --qmp SOCKET names
// (exactly one of them is set). For --qmp the VM's Monitors hold that
// socket alone; a path that is not a socket, or a socket that does not
// answer as QMP, is ErrInvalid. Resolve leaves no connection open.
func Resolve(ctx context.Context, name, sock string) (VM, error) {
	switch {
	case name != "" && sock != "":
		return VM{}, fmt.Errorf("qemuproc: --vm and --qmp both given: name the VM or its QMP socket, not both: %w", ErrInvalid)
	case name != "":
		return Find(name)
	case sock == "":
		return VM{}, fmt.Errorf("qemuproc: no VM given: pass --vm NAME (see netctl vm list) or --qmp SOCKET: %w", ErrInvalid)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		return VM{}, fmt.Errorf("qemuproc: --qmp %s: %w: pass the path of QEMU's QMP socket (-qmp unix:PATH,server=on,wait=off): %w", sock, err, ErrInvalid)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return VM{}, fmt.Errorf("qemuproc: --qmp %s is not a socket (%s): pass the path of QEMU's QMP socket (-qmp unix:PATH,server=on,wait=off): %w", sock, fi.Mode().Type(), ErrInvalid)
	}
	// A socket on a listed VM's command line: no need to connect.
	if vms, err := List(); err == nil {
		for _, vm := range vms {
			for _, m := range vm.Monitors {
				if m.Socket == "" || m.Abstract {
					continue
				}
				if mfi, err := os.Stat(m.Socket); err == nil && os.SameFile(fi, mfi) {
					m.Socket = sock
					vm.Monitors = []Monitor{m}
					return vm, nil
				}
			}
		}
	}
	// Otherwise ask the socket itself who serves it.
	c, err := dialMonitor(ctx, sock)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return VM{}, fmt.Errorf("qemuproc: --qmp %s: %w", sock, err)
		}
		return VM{}, fmt.Errorf("qemuproc: --qmp %s is not a QEMU QMP socket that answers: %w: %w", sock, err, ErrInvalid)
	}
	pid, err := c.PeerPID()
	c.Close()
	if err != nil {
		return VM{}, fmt.Errorf("qemuproc: --qmp %s: %w", sock, err)
	}
	vm, ok := readVM(pid)
	if !ok {
		vm = VM{PID: pid}
	}
	vm.Monitors = []Monitor{{Option: "--qmp", Path: sock, Server: true, Socket: sock}}
	return vm, nil
}

// Dial connects to one of vm's QMP monitors and does the handshake; the
// caller owns the returned client. Monitors are tried in command-line
// order. One on which QEMU has a client that a live process holds
// (sock_diag and /proc, where netctl may read them) is busy at once;
// otherwise the connection gets GreetingTimeout (or ctx's deadline, if
// sooner) and silence is busy. A monitor whose QEMU is not vm.PID is
// refused.
//
// When none can be used the error says why: every monitor busy is
// ErrBusy and names who holds each where it can tell; a VM whose only
// monitors are libvirt's is ErrConflict and points to libvirt (the hook,
// virsh attach-device), without connecting; no monitor at all, a VM
// that has exited since it was found (its PID and StartTime no longer
// match), or monitors that do not answer although nobody holds them
// (QEMU stopped with SIGSTOP, hung) is ErrNotAvailable.
func Dial(ctx context.Context, vm VM) (*qmp.Client, error) {
	if vm.PID != 0 && vm.StartTime != 0 {
		if st, err := StartTime(vm.PID); err != nil || st != vm.StartTime {
			return nil, fmt.Errorf("qemuproc: VM %s has exited since it was found (pid %d is gone or another process now): %w", vmLabel(vm), vm.PID, ErrNotAvailable)
		}
	}
	var why []string
	busy, libvirt, tried := 0, 0, 0
	for _, m := range vm.Monitors {
		label := m.String()
		if m.Libvirt {
			libvirt++
		}
		if m.Unusable != "" || m.Socket == "" {
			why = append(why, fmt.Sprintf("%s: %s", label, m.Unusable))
			continue
		}
		tried++
		// A live client on this monitor is busy without a connection
		// of ours left in QEMU's queue; otherwise the greeting decides.
		if who := holder(vm.PID, m); who != "" {
			busy++
			why = append(why, fmt.Sprintf("%s in use by %s", label, who))
			continue
		}
		c, err := dialMonitor(ctx, m.Socket)
		if err == nil {
			pid, perr := c.PeerPID()
			if perr == nil && (vm.PID == 0 || pid == vm.PID) {
				return c, nil
			}
			c.Close()
			if perr != nil {
				err = perr
			} else {
				err = fmt.Errorf("served by pid %d, not the VM's pid %d (a stale socket path reused?): %w", pid, vm.PID, ErrConflict)
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("qemuproc: VM %s: %w", vmLabel(vm), ctx.Err())
		}
		if errors.Is(err, ErrBusy) {
			if why2 := notAnswering(vm.PID, m); why2 != "" {
				why = append(why, fmt.Sprintf("%s: %s", label, why2))
				continue
			}
			busy++
			who := holder(vm.PID, m)
			if who == "" {
				who = fmt.Sprintf("another client (no greeting within %v)", GreetingTimeout)
			}
			why = append(why, fmt.Sprintf("%s in use by %s", label, who))
			continue
		}
		why = append(why, fmt.Sprintf("%s: %v", label, err))
	}
	detail := strings.Join(why, "; ")
	switch {
	case len(vm.Monitors) == 0:
		return nil, fmt.Errorf("qemuproc: VM %s has no QMP monitor: start QEMU with -qmp unix:PATH,server=on,wait=off: %w", vmLabel(vm), ErrNotAvailable)
	case tried == 0 && libvirt > 0:
		return nil, fmt.Errorf("qemuproc: VM %s is libvirt's: its only QMP monitor is libvirtd's (%s); %s: %w", vmLabel(vm), detail, libvirtAdvice, ErrConflict)
	case tried == 0:
		return nil, fmt.Errorf("qemuproc: VM %s has no QMP monitor netctl can reach (%s): add -qmp unix:PATH,server=on,wait=off to its command line: %w", vmLabel(vm), detail, ErrNotAvailable)
	case busy == tried:
		return nil, fmt.Errorf("qemuproc: VM %s: every QMP monitor is in use (QEMU serves one client per monitor): %s; close one of those clients or give QEMU another -qmp monitor: %w", vmLabel(vm), detail, ErrBusy)
	}
	return nil, fmt.Errorf("qemuproc: VM %s: no QMP monitor answered: %s: %w", vmLabel(vm), detail, ErrNotAvailable)
}

// notAnswering explains a greeting that never came on a monitor on which
// QEMU has no client, so nobody is holding it: the process is stopped,
// or hung. It is "" when QEMU does have a client (busy) or netctl cannot
// tell.
func notAnswering(pid int, m Monitor) string {
	peers, ok := monitorClients(pid, m)
	if !ok || len(peers) > 0 {
		return ""
	}
	switch processState(pid) {
	case 'T':
		return fmt.Sprintf("QEMU (pid %d) is stopped (SIGSTOP): resume it with kill -CONT %d", pid, pid)
	case 't':
		return fmt.Sprintf("QEMU (pid %d) is stopped by a debugger (ptrace)", pid)
	case 'Z', 'X', 0:
		return fmt.Sprintf("QEMU (pid %d) has exited", pid)
	}
	return fmt.Sprintf("QEMU (pid %d) has no client on this monitor yet did not greet within %v: it is hung or overloaded", pid, GreetingTimeout)
}

func vmLabel(vm VM) string {
	if vm.Name != "" {
		return fmt.Sprintf("%q (pid %d)", vm.Name, vm.PID)
	}
	return fmt.Sprintf("pid %d", vm.PID)
}

// dialMonitor connects to a QMP socket and waits at most GreetingTimeout
// for the greeting: silence is ErrBusy. QEMU listens with a backlog of 1:
// while a client holds the monitor, the kernel queues up to two more
// connections (connect succeeds, nothing is said) and refuses the next
// with EAGAIN, also busy. A connection that gave up stays queued until
// QEMU, once the holder leaves, accepts it and sees it closed; so EAGAIN
// is retried until the deadline, while QEMU drains its queue.
func dialMonitor(ctx context.Context, sock string) (*qmp.Client, error) {
	gctx, cancel := context.WithTimeout(ctx, GreetingTimeout)
	defer cancel()
	busy := fmt.Errorf("no greeting within %v (QEMU serves one client per monitor): %w", GreetingTimeout, ErrBusy)
	var conn *net.UnixConn
	for {
		var err error
		conn, err = dialUnix(gctx, sock)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EAGAIN) {
			return nil, err
		}
		select {
		case <-gctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, busy
		case <-time.After(50 * time.Millisecond):
		}
	}
	c, err := qmp.New(gctx, conn)
	if err != nil {
		conn.Close()
		if ctx.Err() == nil && gctx.Err() != nil {
			return nil, busy
		}
		return nil, err
	}
	return c, nil
}

// dialUnix connects to a unix socket; "@NAME" is an abstract one. A path
// longer than sun_path's 107 bytes (a socket under /proc/PID/root/...) is
// reached through an O_PATH fd of its directory.
func dialUnix(ctx context.Context, sock string) (*net.UnixConn, error) {
	addr := sock
	if len(sock) > 107 && !strings.HasPrefix(sock, "@") {
		fd, err := unix.Open(filepath.Dir(sock), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open the directory of %s: %w", sock, err)
		}
		defer unix.Close(fd) // connect has resolved the path once it returns
		addr = fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(sock))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c.(*net.UnixConn), nil
}
