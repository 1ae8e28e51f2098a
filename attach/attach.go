package attach

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// Attach gives the VM behind req.QMP a virtio-net NIC and records it. On
// any failure everything done so far is undone (in QEMU, on the host and
// in the state directory) and the error names the step that failed and
// what to do; when an undo fails too, the error says what may be left.
//
// Equivalent (userspace path, one queue): getfd netctl-ID-tap0; netdev_add
// type=tap,id=netctl-ID,fds=netctl-ID-tap0,vhost=off; device_add
// virtio-net-pci,netdev=netctl-ID,id=ID,mac=MAC.
func Attach(ctx context.Context, r Request) (*state.NIC, error) {
	r.Times.begin()
	p, err := r.check()
	if err != nil {
		return nil, err
	}
	a := &attacher{p: p, h: p.Host, times: r.Times}
	store, err := state.Open(p.StateDir)
	if err != nil {
		return nil, step("state", err)
	}
	// The VM's lock, taken before connecting: QEMU serves one QMP
	// connection at a time (and a second connect fails with EAGAIN once
	// its backlog is full), so the lock is the monitor's: the socket's.
	// It is held until the undos are done: a record still attaching
	// under a lock nobody holds is an attach that was killed, which gc
	// undoes.
	lock, err := store.Lock(ctx, state.LockKey(p.QMP))
	if err != nil {
		return nil, step("lock the VM", err)
	}
	defer lock.Unlock()
	a.store = store
	a.times.mark("check the request, open the state, lock the VM")
	nic, err := a.run(ctx)
	// QEMU has its own copies of what it got; netctl's vhost fds go, on
	// success and on failure, and on failure before the undos: deleting a
	// vdpa device waits until its /dev/vhost-vdpa-N is closed.
	for _, fd := range a.fds {
		a.h.CloseFD(fd)
	}
	a.fds = nil
	if err != nil {
		if uerr := a.undo.run(ctx); uerr != nil {
			err = fmt.Errorf("%w; and rolling back failed, so something may be left: %w", err, uerr)
		}
	}
	// The tap's or macvtap's queues after the undos, which may still
	// need the link.
	if a.backend != nil {
		a.backend.Release()
	}
	if a.c != nil {
		a.c.Close()
	}
	if err != nil {
		return nil, err
	}
	a.times.mark("close")
	return nic, nil
}

type attacher struct {
	pid     int // QEMU's pid and start time, once known
	start   uint64
	p       *parsed
	h       Host
	c       *qmp.Client // the one connection for the whole sequence
	undo    undoStack
	fds     []int   // vhost-net and vhost-vdpa fds netctl opened: closed when Attach returns
	backend Backend // the tap or macvtap: released when Attach returns
	bus     string  // device_add bus= ("" QEMU's choice)
	// nic is the record, saved (record) before each thing attach creates
	// is created, so that it always names what may exist.
	nic   *state.NIC
	store *state.Store
	times *StepTimes
}

// beforeIntent, set only by tests, runs just before the intent record is
// written.
var beforeIntent func()

// record saves the record as it is now, unsynced (state.Store.Stage: the
// NIC's last record, before device_add, is synced); the caller holds the
// VM's lock.
func (a *attacher) record(what string) error {
	if err := a.store.Stage(a.nic); err != nil {
		return step("record "+what, err)
	}
	return nil
}

// pickBus decides where the NIC goes: --bus; else on q35 the first free
// pcie-root-port (q35's pcie.0 takes no hotplug); else QEMU's choice.
func (a *attacher) pickBus(ctx context.Context, key string, q *qemuState) error {
	switch {
	case a.p.Bus != "":
		a.bus = a.p.Bus
		return nil
	case a.p.ExtraProps["bus"] != nil, !strings.Contains(q.Machine, "q35"):
		return nil
	}
	// The ports of NICs netctl attached to this QEMU process are read
	// last: one qom-list a port (freePorts), and a VM with many NICs
	// would otherwise read them all before it reached a free one. Which
	// port is free is always read from QEMU: a record only orders.
	var first, last []string
	taken := a.recordedPorts(key, q)
	for _, p := range rootPorts(q.Types) {
		if taken[p] {
			last = append(last, p)
		} else {
			first = append(first, p)
		}
	}
	var err error
	if q.FreePorts, err = freePorts(ctx, a.c, slices.Concat(first, last), true); err != nil {
		return err
	}
	switch {
	case len(q.FreePorts) == 0:
		return fmt.Errorf("a q35 VM hotplugs into a pcie-root-port, and this QEMU has no free one: start QEMU with "+
			"-device pcie-root-port,id=rp1,bus=pcie.0,chassis=1 (one per NIC to hotplug; chassis unique), or name a bus with --bus: %w", ErrNotAvailable)
	default:
		a.bus = q.FreePorts[0]
	}
	return nil
}

// recordedPorts are the buses of the NICs this QEMU process has (by
// device id) that netctl's records of the VM (key) say netctl put there.
func (a *attacher) recordedPorts(key string, q *qemuState) map[string]bool {
	ports := map[string]bool{}
	for id, bus := range a.store.Buses(key, a.pid, a.start) {
		if q.Devices[id] {
			ports[bus] = true
		}
	}
	return ports
}

// passFD is an fd to pass with getfd under name.
type passFD struct {
	name string
	fd   int
}

// step wraps a step's error with its name.
func step(name string, err error) error { return fmt.Errorf("attach: %s: %w", name, err) }

func (a *attacher) run(ctx context.Context) (*state.NIC, error) {
	p, store := a.p, a.store
	c, err := dialQMP(ctx, p.QMP)
	if err != nil {
		return nil, step("connect to QEMU", err)
	}
	a.c = c // closed by Attach, after the undos
	a.times.mark("connect to QEMU")
	q, err := readQEMU(ctx, c)
	if err != nil {
		return nil, step("read QEMU", err)
	}
	a.times.mark("read QEMU")
	vm := p.VMName
	if vm == "" {
		vm = q.Name
	}
	if err := state.CheckVMName(vm); err != nil {
		return nil, step("VM name", err)
	}
	key := state.KeyFor(vm, p.QMP)
	netdev := NetdevID(p.ID)
	pid, err := c.PeerPID()
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	start, err := state.ProcStartTime(pid)
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	a.pid, a.start = pid, start
	if err := checkPeer(p, pid, start); err != nil {
		return nil, step("check QEMU", err)
	}
	a.times.mark("check QEMU's process")
	if q, err = a.checkID(ctx, store, key, q); err != nil {
		return nil, step("check the id", err)
	}
	if err := a.pickBus(ctx, key, q); err != nil {
		return nil, step("choose the PCI bus", err)
	}
	a.times.mark("check the id, choose the bus")
	fdPrefix := "netctl-" + p.ID + "-"

	// The intent record goes in before anything is created, and each
	// later save before the next thing is: a kill at any point leaves a
	// record naming all that may exist, for netctl gc, detach or this
	// attach again. Its removal is the last undo, run only when every
	// undo above it succeeded.
	nic := &state.NIC{Schema: state.Schema, VM: vm, QEMUPID: pid, QEMUStart: start, QMP: p.QMP, ID: p.ID, Netdev: netdev,
		Machine: q.Machine, QEMUVersion: q.Version, Backend: tentativeBackend(p), Queues: p.Queues, MAC: p.mac.String(), MTU: p.MTU,
		Properties: map[string]string{}, Status: state.StatusAttaching, Attached: time.Now().UTC()}
	nic.NetNS, _ = state.NetNS() // 0 (unknown) if /proc cannot say
	a.nic = nic
	if beforeIntent != nil {
		beforeIntent()
	}
	// Created, not saved: another attach of this id on this VM through
	// another QMP socket (another lock) may have passed its checks too.
	if err := store.Create(nic); err != nil {
		if errors.Is(err, state.ErrExists) {
			err = fmt.Errorf("%w: another netctl attach of %s on this VM (through another QMP socket) got there first; nothing was changed: %w", err, p.ID, ErrConflict)
		}
		return nil, step("record the intent to attach", err)
	}
	a.undo.pushRecord("remove the record", func(context.Context) error { return store.Remove(key, p.ID) })
	a.times.mark("record the intent")

	dec, err := a.decide(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	a.times.mark("decide (probe the host)")
	nic.Backend, nic.Features, nic.BusyPollUS = dec.Backend, dec.OfferNames, dec.BusyPollUS
	nic.Pool = p.Pool.String()
	for _, s := range dec.Steps {
		nic.Steps = append(nic.Steps, state.Step{Backend: s.Backend, Chosen: s.Chosen, Reason: s.Reason})
	}

	taps, vhosts, netdevArgs, err := a.openBackend(ctx, dec, nic, fdPrefix)
	if err != nil {
		return nil, err
	}
	a.times.mark("open the backend")
	netdevArgs["id"] = netdev
	// Every getfd name before the first getfd: the names a kill leaves
	// parked in QEMU are then in the record.
	for _, f := range slices.Concat(taps, vhosts) {
		nic.FDNames = append(nic.FDNames, f.name)
	}
	if err := a.record("the backend"); err != nil {
		return nil, err
	}
	a.times.mark("record the backend")

	if err := a.addNetdev(ctx, slices.Concat(taps, vhosts), netdevArgs, nic); err != nil {
		return nil, err
	}
	a.times.mark("getfd, netdev_add")

	if err := a.addDevice(ctx, dec, nic, store); err != nil {
		return nil, err
	}
	a.times.mark("device_add, record")
	a.undo.drop()
	return nic, nil
}

// tentativeBackend is the intent record's backend until the decision:
// vdpa when attach creates a vdpa device first, else what was asked for.
func tentativeBackend(p *parsed) string {
	switch {
	case p.Mgmtdev != "" || p.VDPA != "":
		return policy.BackendVDPA
	case p.Backend == policy.BackendVhostNet:
		return p.Backend
	}
	return policy.BackendUserspace
}

// checkPeer checks the process that serves the connection attach uses
// (its SO_PEERCRED pid and that pid's start time): the one --vm found,
// when it found one, and a QEMU netctl trusts (qemuproc.Trust: its uids
// and executable), since attach hands it fds.
func checkPeer(p *parsed, pid int, start uint64) error {
	if p.QEMUPID != 0 && (pid != p.QEMUPID || (p.QEMUStart != 0 && start != p.QEMUStart)) {
		return fmt.Errorf("%s is served by pid %d, not the VM's QEMU (pid %d) that --vm found: another process bound the socket since; nothing was changed: %w",
			p.QMP, pid, p.QEMUPID, ErrConflict)
	}
	trust, err := qemuproc.DefaultTrust()
	if err != nil {
		return err
	}
	if err := trust.Check(pid, start); err != nil {
		return fmt.Errorf("%s: %w: netctl hands a QEMU it does not trust no fd; nothing was changed", p.QMP, err)
	}
	return nil
}
