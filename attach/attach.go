package attach

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	p, err := r.check()
	if err != nil {
		return nil, err
	}
	a := &attacher{p: p, h: p.Host}
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
}

// pickBus decides where the NIC goes: --bus; else on q35 a free
// pcie-root-port (q35's pcie.0 takes no hotplug); else QEMU's choice.
func (a *attacher) pickBus(q *qemuState) error {
	switch {
	case a.p.Bus != "":
		a.bus = a.p.Bus
	case a.p.ExtraProps["bus"] != nil, !strings.Contains(q.Machine, "q35"):
	case len(q.FreePorts) == 0:
		return fmt.Errorf("a q35 VM hotplugs into a pcie-root-port, and this QEMU has no free one: start QEMU with "+
			"-device pcie-root-port,id=rp1,bus=pcie.0,chassis=1 (one per NIC to hotplug; chassis unique), or name a bus with --bus: %w", ErrNotAvailable)
	default:
		a.bus = q.FreePorts[0]
	}
	return nil
}

// passFD is an fd to pass with getfd under name.
type passFD struct {
	name string
	fd   int
}

// step wraps a step's error with its name.
func step(name string, err error) error { return fmt.Errorf("attach: %s: %w", name, err) }

func (a *attacher) run(ctx context.Context) (*state.NIC, error) {
	p := a.p
	store, err := state.Open(p.StateDir)
	if err != nil {
		return nil, step("state", err)
	}
	// The VM's lock, taken before connecting: QEMU serves one QMP
	// connection at a time (and a second connect fails with EAGAIN once
	// its backlog is full), so the lock is the monitor's: the socket's.
	lock, err := store.Lock(ctx, state.LockKey(p.QMP))
	if err != nil {
		return nil, step("lock the VM", err)
	}
	defer lock.Unlock()
	c, err := dialQMP(ctx, p.QMP)
	if err != nil {
		return nil, step("connect to QEMU", err)
	}
	a.c = c // closed by Attach, after the undos
	q, err := readQEMU(ctx, c)
	if err != nil {
		return nil, step("read QEMU", err)
	}
	vm := p.VMName
	if vm == "" {
		vm = q.Name
	}
	if err := state.CheckVMName(vm); err != nil {
		return nil, step("VM name", err)
	}
	key := state.KeyFor(vm, p.QMP)
	netdev := NetdevID(p.ID)
	if err := checkFree(store, key, p.ID, q); err != nil {
		return nil, step("check the id", err)
	}
	if err := a.pickBus(q); err != nil {
		return nil, step("choose the PCI bus", err)
	}
	fdPrefix := "netctl-" + p.ID + "-"
	pid, err := c.PeerPID()
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	start, err := state.ProcStartTime(pid)
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	a.pid, a.start = pid, start

	dec, err := a.decide(ctx, q.Version)
	if err != nil {
		return nil, err
	}

	nic := &state.NIC{Schema: state.Schema, VM: vm, QEMUPID: pid, QEMUStart: start, QMP: p.QMP, ID: p.ID, Netdev: netdev,
		Machine: q.Machine, QEMUVersion: q.Version,
		Backend: dec.Backend, Queues: p.Queues, MAC: p.mac.String(), MTU: p.MTU, Features: dec.OfferNames,
		Properties: map[string]string{}, BusyPollUS: dec.BusyPollUS, Status: state.StatusAttached, Attached: time.Now().UTC()}
	nic.NetNS, _ = state.NetNS() // 0 (unknown) if /proc cannot say
	for _, s := range dec.Steps {
		nic.Steps = append(nic.Steps, state.Step{Backend: s.Backend, Chosen: s.Chosen, Reason: s.Reason})
	}

	taps, vhosts, netdevArgs, err := a.openBackend(ctx, dec, nic, fdPrefix)
	if err != nil {
		return nil, err
	}
	netdevArgs["id"] = netdev

	if err := a.addNetdev(ctx, slices.Concat(taps, vhosts), netdevArgs, nic); err != nil {
		return nil, err
	}

	if err := a.addDevice(ctx, dec, nic, store, key); err != nil {
		return nil, err
	}
	a.undo.drop()
	return nic, nil
}
