package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/netctl/netctl/internal/errs"
)

// errNoVMLookup: --vm is not wired to a QEMU finder yet.
var errNoVMLookup = errors.New("finding a VM by name is not available yet")

// resolveTarget turns --vm NAME or --qmp SOCKET into the QMP socket and
// the VM's name ("" when only the socket is known: attach asks QEMU).
// Exactly one of vm and sock is set (the caller checks).
func resolveTarget(ctx context.Context, vm, sock string) (string, string, error) {
	if vm != "" {
		return "", "", fmt.Errorf("--vm %s: %w: name the VM's QMP socket with --qmp SOCKET "+
			"(QEMU started with -qmp unix:SOCKET,server=on,wait=off)", vm, errNoVMLookup)
	}
	abs, err := filepath.Abs(sock)
	if err != nil {
		return "", "", fmt.Errorf("--qmp %s: %w", sock, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", "", fmt.Errorf("--qmp %s: %v: name QEMU's QMP socket: %w", sock, err, errs.ErrInvalid)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", "", fmt.Errorf("--qmp %s is not a socket: name QEMU's QMP socket (-qmp unix:SOCKET,server=on,wait=off): %w", sock, errs.ErrInvalid)
	}
	return abs, "", nil
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
