package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qemuproc"
)

// resolveTarget turns --vm NAME or --qmp SOCKET into the QMP socket and
// the VM's name ("" when only the socket is known: attach asks QEMU).
// Exactly one of vm and sock is set (the caller checks). For --vm the
// VM is found by its -name (qemuproc) and the socket is its first QMP
// monitor that answers (one that another client holds is busy at once,
// by sock_diag, without waiting); a VM with none (every monitor busy, or
// libvirt's) is refused with qemuproc's reason, before anything changes.
func resolveTarget(ctx context.Context, vm, sock string) (vmTarget, error) {
	if vm != "" {
		return vmSocket(ctx, vm)
	}
	abs, err := filepath.Abs(sock)
	if err != nil {
		return vmTarget{}, fmt.Errorf("--qmp %s: %w", sock, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return vmTarget{}, fmt.Errorf("--qmp %s: %v: name QEMU's QMP socket: %w", sock, err, errs.ErrInvalid)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return vmTarget{}, fmt.Errorf("--qmp %s is not a socket: name QEMU's QMP socket (-qmp unix:SOCKET,server=on,wait=off): %w", sock, errs.ErrInvalid)
	}
	return vmTarget{Sock: abs}, nil
}

// vmTarget is what --vm or --qmp named: the socket, and for --vm the
// VM's name and the QEMU process found (qemuproc.Find: one netctl
// trusts), which attach checks is the peer of the connection it uses.
type vmTarget struct {
	Sock, Name string
	PID        int
	Start      uint64
}

func vmSocket(ctx context.Context, name string) (vmTarget, error) {
	v, err := qemuproc.Find(name)
	if err != nil {
		return vmTarget{}, err
	}
	found := func(sock string) vmTarget { return vmTarget{Sock: sock, Name: v.Name, PID: v.PID, Start: v.StartTime} }
	var usable []qemuproc.Monitor
	for _, m := range v.Monitors {
		if m.Unusable == "" && m.Socket != "" && !m.Abstract && !m.Libvirt {
			usable = append(usable, m)
		}
	}
	for _, m := range usable {
		if st, _ := qemuproc.Check(ctx, v, m); st == qemuproc.StateReachable {
			return found(m.Socket), nil
		}
	}
	// None: Dial says why (busy, libvirt's, none at all) in its words.
	c, err := qemuproc.Dial(ctx, v)
	if err == nil { // answered after all: the first monitor that greets
		c.Close()
		if len(usable) > 0 {
			return found(usable[0].Socket), nil
		}
		err = fmt.Errorf("VM %s: no QMP unix socket netctl can use: start QEMU with -qmp unix:PATH,server=on,wait=off: %w", name, errs.ErrNotAvailable)
	}
	return vmTarget{}, err
}

// runDir is the state root: NETCTL_RUN_DIR, or /run/netctl.
func runDir() string {
	if d := os.Getenv("NETCTL_RUN_DIR"); d != "" {
		return d
	}
	return ""
}

func sortedProps(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}
