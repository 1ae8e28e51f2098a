package migrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/diagnose/gather"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// ExportRequest names the source VM.
type ExportRequest struct {
	QMP      string // the source QEMU's QMP socket
	VMName   string // "" takes QEMU's own (query-name)
	StateDir string // "" state.DefaultDir
}

// Export describes the VM's netctl NICs for the destination: each
// attached record, the device's PCI slot (query-pci) and what its guest
// negotiated (x-query-virtio-status). It changes nothing. A VM with no
// NIC netctl attached, or one whose NIC is not in a settled state (an
// attach or detach under way), is refused.
func Export(ctx context.Context, r ExportRequest) (*Manifest, error) {
	sock, err := filepath.Abs(r.QMP)
	if err != nil || r.QMP == "" {
		return nil, fmt.Errorf("migrate export: name the source VM (--vm NAME or --qmp SOCKET): %w", errs.ErrInvalid)
	}
	store, err := state.Open(r.StateDir)
	if err != nil {
		return nil, fmt.Errorf("migrate export: %w", err)
	}
	// The VM's lock: no attach or detach changes the NICs while they are
	// read.
	lock, err := store.Lock(ctx, state.LockKey(sock))
	if err != nil {
		return nil, fmt.Errorf("migrate export: lock the VM: %w", err)
	}
	defer lock.Unlock()
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		return nil, fmt.Errorf("migrate export: connect to QEMU: %w", err)
	}
	defer c.Close()
	q, err := readVM(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("migrate export: %w", err)
	}
	vm := r.VMName
	if vm == "" {
		vm = q.name
	}
	pid, _ := c.PeerPID()
	recs, bad, err := store.List(state.KeyFor(vm, sock))
	if err != nil {
		return nil, fmt.Errorf("migrate export: %w", err)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("migrate export: a record of %s cannot be read (%w): fix or remove it (netctl gc) first", vm, bad[0])
	}
	m := &Manifest{Schema: Schema, VM: vm, QEMUVersion: q.version, Machine: q.machine}
	m.Source, _ = os.Hostname()
	for _, n := range recs {
		if n.QEMUPID != pid || n.Libvirt != nil {
			continue // another QEMU's record under this name (gc's), or libvirt's
		}
		if n.Status != state.StatusAttached {
			return nil, fmt.Errorf("migrate export: NIC %s of %s is %s, not attached: finish it first (netctl list; netctl detach or gc): %w", n.ID, vm, n.Status, errs.ErrConflict)
		}
		e, err := exportNIC(ctx, c, n)
		if err != nil {
			return nil, fmt.Errorf("migrate export: NIC %s: %w", n.ID, err)
		}
		m.NICs = append(m.NICs, e)
	}
	if len(m.NICs) == 0 {
		return nil, fmt.Errorf("migrate export: netctl attached no NIC to %s (netctl list): nothing to move: %w", vm, state.ErrNotFound)
	}
	slices.SortFunc(m.NICs, func(a, b NIC) int { return cmpString(a.ID, b.ID) })
	return m, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func exportNIC(ctx context.Context, c *qmp.Client, n *state.NIC) (NIC, error) {
	e := NIC{ID: n.ID, MAC: n.MAC, Queues: max(n.Queues, 1), MTU: n.MTU, Backend: n.Backend, Profile: policy.Throughput,
		Offered: n.Features, Pool: n.Pool, Bus: n.Properties["bus"], Properties: n.Properties}
	if n.BusyPollUS > 0 {
		e.Profile = policy.Latency
	}
	switch {
	case n.Tap != nil && !n.Tap.Created:
		e.Tap = n.Tap.Name
	case n.Macvtap != nil:
		e.MacvtapOn = n.Macvtap.Lower + ":" + n.Macvtap.Mode
	case n.VDPA != nil && n.VDPA.Created:
		e.Mgmtdev = n.VDPA.Mgmtdev
	case n.VDPA != nil:
		e.VDPA = n.VDPA.Name
	}
	addr, err := pciSlot(ctx, c, n.ID)
	if err != nil {
		return e, err
	}
	e.Addr = addr
	snap, err := gather.Gather(ctx, c, gather.Options{ID: n.ID})
	if err != nil {
		return e, fmt.Errorf("read what the guest negotiated: %w", err)
	}
	rep, err := diagnose.Explain(snap)
	if err != nil {
		return e, fmt.Errorf("read what the guest negotiated: %w", err)
	}
	if _, acked, ok := rep.Words(); ok && rep.Negotiated() {
		e.Negotiated = acked.Names()
	}
	return e, nil
}

// errNoSlot: query-pci does not list the device.
var errNoSlot = errors.New("not on any PCI bus QEMU lists (query-pci)")
