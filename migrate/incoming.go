package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/virtio"
)

// IncomingRequest names the destination QEMU (started with -incoming
// defer) and what to re-create in it.
type IncomingRequest struct {
	QMP      string
	VMName   string // "" takes QEMU's own
	Manifest *Manifest
	// Pool, when set, pins every NIC to the pool's plan as well as to
	// what its source offered.
	Pool     *policy.Pool
	StateDir string
	// Host is attach's host (tests); nil is the real one.
	Host attach.Host
	// QEMUPID and QEMUStart: the process --vm found (attach checks it).
	QEMUPID   int
	QEMUStart uint64
}

// Incoming re-creates the manifest's NICs in the destination QEMU before
// migrate-incoming: the same ids, MACs, queue pairs, MTU and PCI slots,
// the backend decided on this host, offering nothing the source did not
// offer (and nothing outside Pool) and refusing, before anything is
// created for a NIC, a host that cannot offer what the guest negotiated
// on the source (the migration would fail at its very end). Each NIC is a
// netctl attach, recorded here (netctl list). On a failure the NICs
// already added stay (a QEMU waiting for its guest cannot unplug: no
// guest answers): the error says to quit that QEMU and run netctl gc.
func Incoming(ctx context.Context, r IncomingRequest) ([]*state.NIC, error) {
	m := r.Manifest
	if m == nil || len(m.NICs) == 0 {
		return nil, fmt.Errorf("migrate incoming: no manifest: netctl migrate export --vm VM > FILE on the source: %w", errs.ErrInvalid)
	}
	sock, err := filepath.Abs(r.QMP)
	if err != nil || r.QMP == "" {
		return nil, fmt.Errorf("migrate incoming: name the destination VM (--vm NAME or --qmp SOCKET): %w", errs.ErrInvalid)
	}
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		return nil, fmt.Errorf("migrate incoming: connect to QEMU: %w", err)
	}
	q, err := readVM(ctx, c)
	pid, _ := c.PeerPID()
	c.Close() // attach connects itself; QEMU serves one monitor connection at a time
	if err != nil {
		return nil, fmt.Errorf("migrate incoming: %w", err)
	}
	if q.status != "inmigrate" {
		return nil, fmt.Errorf("migrate incoming: QEMU at %s is %s, not waiting for a migration: start it as the source was, with -incoming defer, and run this before migrate-incoming: %w",
			sock, q.status, errs.ErrInvalid)
	}
	if m.Machine != "" && q.machine != m.Machine {
		return nil, fmt.Errorf("migrate incoming: the source's machine is %s, this QEMU's %s: start it with the source's -machine: %w", m.Machine, q.machine, errs.ErrInvalid)
	}
	vm := r.VMName
	if vm == "" {
		vm = q.name
	}
	if err := sameHostClash(r.StateDir, vm, sock, pid, m); err != nil {
		return nil, err
	}
	// Every NIC's request and its checks before the first is added: a
	// QEMU waiting for its guest cannot unplug one (no guest answers).
	reqs := make([]attach.Request, 0, len(m.NICs))
	for _, n := range m.NICs {
		req, err := attachRequest(r, sock, vm, n)
		if err != nil {
			return nil, fmt.Errorf("migrate incoming: NIC %s: %w; nothing was added", n.ID, err)
		}
		reqs = append(reqs, req)
	}
	if err := attach.Preflight(ctx, reqs); err != nil {
		return nil, fmt.Errorf("migrate incoming: %w; nothing was added", err)
	}
	var done []*state.NIC
	for i, n := range m.NICs {
		nic, err := attach.Attach(ctx, reqs[i])
		if err != nil {
			if len(done) > 0 {
				var ids []string
				for _, d := range done {
					ids = append(ids, d.ID)
				}
				err = fmt.Errorf("%w; NICs %s were added: this QEMU has no guest yet and cannot unplug them: quit it (nothing is lost), then netctl gc", err, strings.Join(ids, " "))
			}
			return done, fmt.Errorf("migrate incoming: NIC %s: %w", n.ID, err)
		}
		done = append(done, nic)
	}
	return done, nil
}

// attachRequest is the attach that re-creates n here.
func attachRequest(r IncomingRequest, sock, vm string, n NIC) (attach.Request, error) {
	offered, err := features(n.Offered)
	if err != nil {
		return attach.Request{}, err
	}
	negotiated, err := features(n.Negotiated)
	if err != nil {
		return attach.Request{}, err
	}
	pin := offered
	hosts := []string{"the source"}
	if len(n.Offered) == 0 {
		pin = policy.Managed() // the source said nothing: pin only the plan
	}
	id := policy.FeatureSetID(pin)
	if r.Pool != nil {
		// The record names the plan (netctl list, diagnose --plan): the
		// NIC is offered nothing outside it, nor outside the source's.
		pin &= r.Pool.Offer
		hosts, id = r.Pool.Hosts, r.Pool.ID
	}
	req := attach.Request{QMP: sock, VMName: vm, ID: n.ID, Queues: n.Queues, MAC: n.MAC, MTU: n.MTU, Profile: n.Profile,
		Bus: n.Bus, Addr: n.Addr, Tap: n.Tap, Macvtap: n.MacvtapOn, VDPA: n.VDPA, Mgmtdev: n.Mgmtdev,
		StateDir: r.StateDir, Host: r.Host, QEMUPID: r.QEMUPID, QEMUStart: r.QEMUStart,
		Pool:    &policy.Pool{ID: id, Offer: pin, Hosts: hosts},
		Require: negotiated & policy.Managed()}
	if bad := req.Require &^ pin; bad != 0 {
		return req, fmt.Errorf("the guest negotiated %v on the source, which the pool's plan %s leaves out: this migration would carry them into the pool; pin the source first: %w",
			virtio.Features(bad), r.Pool.ID, errs.ErrNotSupported)
	}
	return req, nil
}

// sameHostClash refuses a destination that would take the records of a
// source QEMU still running on this host under the same VM name
// (netctl's records are per VM name: same-host migration needs another
// -name for the destination).
func sameHostClash(dir, vm, sock string, pid int, m *Manifest) error {
	store, err := state.Open(dir)
	if err != nil {
		return fmt.Errorf("migrate incoming: %w", err)
	}
	recs, _, err := store.List(state.KeyFor(vm, sock))
	if err != nil {
		return fmt.Errorf("migrate incoming: %w", err)
	}
	for _, n := range recs {
		if n.QEMUPID != pid && state.SameProcess(n.QEMUPID, n.QEMUStart) {
			return fmt.Errorf("migrate incoming: netctl's records name VM %s's NIC %s in QEMU pid %d, which still runs here (the source?): on one host start the destination with another -name (netctl keeps NICs per VM name): %w",
				vm, n.ID, n.QEMUPID, errs.ErrConflict)
		}
	}
	return nil
}
