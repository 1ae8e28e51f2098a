package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/state"
)

// detachTarget resolves --vm/--qmp for detach. When the VM is gone (no
// QEMU named --vm runs, or the --qmp socket file is gone with it), the
// NIC's record still says which socket it was on: detach then cleans up
// the host side and the record (attach.Detach does that when QEMU is
// gone). Only a record of NIC id whose QEMU has exited is used so.
func detachTarget(ctx context.Context, c *cli.Context, path, id string) (sock, name string, err error) {
	tg, err := target(ctx, c, path)
	if err == nil {
		return tg.Sock, tg.Name, nil
	}
	vm, q := c.String("vm"), c.String("qmp")
	var ue *usageError
	switch {
	case errors.As(err, &ue) || state.CheckID(id) != nil:
		return "", "", err
	case vm != "" && errors.Is(err, qemuproc.ErrNoVM):
	case q != "":
		abs, aerr := filepath.Abs(q)
		if _, serr := os.Stat(abs); aerr != nil || !errors.Is(serr, os.ErrNotExist) {
			return "", "", err
		}
		q = abs
	default:
		return "", "", err
	}
	store, serr := state.Open(runDir())
	if serr != nil {
		return "", "", err
	}
	key := ""
	if vm != "" {
		key = state.VMKey(vm)
	}
	recs, _, lerr := store.List(key)
	if lerr != nil {
		return "", "", err
	}
	var found []*state.NIC
	for _, n := range recs {
		if n.ID == id && (vm == "" || n.VM == vm) && (q == "" || n.QMP == q) && !state.SameProcess(n.QEMUPID, n.QEMUStart) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", "", err
	case 1:
		return found[0].QMP, found[0].VM, nil
	}
	return "", "", fmt.Errorf("%d records of NIC %s on VM %s, each on another QMP socket, and its QEMU is gone: name the socket with --qmp (netctl list shows them), or run netctl gc: %w",
		len(found), id, vm, state.ErrInvalid)
}
