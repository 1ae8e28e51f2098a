package attach

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/host"
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
	if err != nil {
		if uerr := a.undo.run(ctx); uerr != nil {
			err = fmt.Errorf("%w; and rolling back failed, so something may be left: %w", err, uerr)
		}
	}
	// QEMU has its own copies of what it got; netctl's go, on success
	// and on failure (after the undos, which may still need the link).
	for _, fd := range a.fds {
		a.h.CloseFD(fd)
	}
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
	if _, err := store.Load(key, p.ID); err == nil {
		return nil, step("check the id", fmt.Errorf("netctl already attached a NIC %s to this VM (netctl list; netctl detach --id %s): %w", p.ID, p.ID, ErrConflict))
	} else if !errors.Is(err, state.ErrNotFound) {
		return nil, step("check the id", err)
	}
	if q.Devices[p.ID] {
		return nil, step("check the id", fmt.Errorf("QEMU already has a device with id %s: pick another --id: %w", p.ID, ErrConflict))
	}
	if q.Netdevs[netdev] || q.Netdevs[p.ID] {
		return nil, step("check the id", fmt.Errorf("QEMU already has a network client %s: pick another --id: %w", netdev, ErrConflict))
	}
	fdPrefix := "netctl-" + p.ID + "-"
	for _, s := range q.FDSets {
		for _, f := range s.FDs {
			if strings.HasPrefix(f.Opaque, fdPrefix) {
				return nil, step("check the id", fmt.Errorf("QEMU's fdset %d holds %q from an earlier netctl attach of %s: remove it (remove-fd fdset-id=%d) or pick another --id: %w", s.ID, f.Opaque, p.ID, s.ID, ErrConflict))
			}
		}
	}
	pid, err := c.PeerPID()
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	start, err := state.ProcStartTime(pid)
	if err != nil {
		return nil, step("find QEMU's pid", err)
	}
	a.pid, a.start = pid, start

	// The decision.
	if p.Mgmtdev != "" {
		// The device must exist to be probed: create it first (undone
		// on any later failure, including a decision against it).
		name := "netctl-" + p.ID
		if len(name) > 32 {
			name = name[:32]
		}
		// MAC, MTU and max_vqp go to the device only when asked for: a
		// management device may refuse config attributes (VDUSE does).
		spec := VDPASpec{Name: name, Mgmtdev: p.Mgmtdev, MTU: p.MTU}
		if p.MAC != "" {
			spec.MAC = p.mac
		}
		if p.Queues > 1 {
			spec.MaxVQP = p.Queues
		}
		if err := a.h.CreateVDPA(ctx, spec); err != nil {
			return nil, step("create vdpa device on "+p.Mgmtdev, err)
		}
		a.undo.push("vdpa dev del "+name, func(ctx context.Context) error { return a.h.DeleteVDPA(ctx, name) })
		p.VDPA = name
	}
	probeFn := p.Probe
	if probeFn == nil {
		probeFn = a.h.Probe
	}
	desc, err := probeFn(ctx)
	if err != nil {
		return nil, step("probe the host", err)
	}
	d2 := *desc
	desc = &d2
	desc.QEMU.Version = q.Version // the running QEMU decides the properties
	desc.QEMU.Error = ""
	restrictVDPA(desc, p)
	dec, err := policy.Decide(desc, policy.Request{Backend: p.Backend, Queues: p.Queues, Profile: p.Profile, QEMU: q.Version})
	if err != nil {
		if errors.Is(err, policy.ErrNotAvailable) {
			// Name the requested backend's own reason (policy's message
			// ends with the last step of the chain).
			for _, s := range dec.Steps {
				if s.Backend == p.Backend {
					return nil, step("choose the backend", fmt.Errorf("--backend %s is not available here: %s: %w", p.Backend, s.Reason, ErrNotAvailable))
				}
			}
		}
		return nil, step("choose the backend", err)
	}
	if dec.Backend != policy.BackendVDPA && p.Mgmtdev != "" {
		// Created for nothing: remove it now.
		if err := a.undo.run(ctx); err != nil {
			return nil, step("remove the unused vdpa device", err)
		}
		p.VDPA = ""
	}

	nic := &state.NIC{Schema: state.Schema, VM: vm, QEMUPID: pid, QEMUStart: start, QMP: p.QMP, ID: p.ID, Netdev: netdev,
		Machine: q.Machine, QEMUVersion: q.Version,
		Backend: dec.Backend, Queues: p.Queues, MAC: p.mac.String(), MTU: p.MTU, Features: dec.OfferNames,
		Properties: map[string]string{}, BusyPollUS: dec.BusyPollUS, Status: state.StatusAttached, Attached: time.Now().UTC()}
	for _, s := range dec.Steps {
		nic.Steps = append(nic.Steps, state.Step{Backend: s.Backend, Chosen: s.Chosen, Reason: s.Reason})
	}

	// The backend and its fds.
	var taps, vhosts []passFD
	netdevArgs := map[string]any{"id": netdev}
	switch dec.Backend {
	case policy.BackendVDPA:
		if p.Mgmtdev != "" {
			nic.VDPA = &state.VDPA{Name: p.VDPA, Mgmtdev: p.Mgmtdev, Created: true}
		} else {
			nic.VDPA = &state.VDPA{Name: p.VDPA}
		}
		fd, path, err := a.h.OpenVDPA(ctx, p.VDPA)
		if err != nil {
			return nil, step("open vdpa device "+p.VDPA, err)
		}
		a.fds = append(a.fds, fd)
		nic.VDPA.Vhost = path
		vhosts = append(vhosts, passFD{fdPrefix + "vdpa0", fd})
		netdevArgs["type"] = "vhost-vdpa"
		netdevArgs["vhostfd"] = fdPrefix + "vdpa0"
	default:
		var b Backend
		if p.mvLower != "" {
			b, err = a.h.CreateMacvtap(MacvtapSpec{Lower: p.mvLower, Mode: p.mvMode, Queues: p.Queues, MTU: p.MTU, MAC: p.mac})
			if err != nil {
				return nil, step("create a macvtap on "+p.mvLower, err)
			}
			nic.Macvtap = &state.Link{Name: b.Name(), Ifindex: b.Ifindex(), Lower: p.mvLower, Mode: p.mvMode.String(), Created: true}
		} else {
			spec := TapSpec{Name: p.Tap, Queues: p.Queues, MTU: p.MTU}
			if p.Tap == "" {
				spec.Name, spec.Create, spec.MAC = "nctl%d", true, tapMAC(p.mac)
			}
			b, err = a.h.OpenTap(spec)
			if err != nil {
				return nil, step("open the tap", err)
			}
			nic.Tap = &state.Link{Name: b.Name(), Ifindex: b.Ifindex(), Created: spec.Create}
		}
		a.backend = b
		a.undo.push("remove "+b.Name(), func(context.Context) error { return b.Destroy() })
		if b.Queues() != p.Queues {
			return nil, step("open the backend", fmt.Errorf("%s has %d queues open, want %d", b.Name(), b.Queues(), p.Queues))
		}
		for i := 0; i < p.Queues; i++ {
			taps = append(taps, passFD{fmt.Sprintf("%stap%d", fdPrefix, i), b.QueueFD(i)})
		}
		netdevArgs["type"] = "tap"
		netdevArgs["fds"] = joinNames(taps)
		if dec.Backend == policy.BackendVhostNet {
			for i := 0; i < p.Queues; i++ {
				fd, err := a.h.OpenVhostNet()
				if err != nil {
					return nil, step(fmt.Sprintf("open /dev/vhost-net for queue pair %d", i), err)
				}
				a.fds = append(a.fds, fd)
				vhosts = append(vhosts, passFD{fmt.Sprintf("%svhost%d", fdPrefix, i), fd})
			}
			netdevArgs["vhost"] = true
			netdevArgs["vhostforce"] = true
			netdevArgs["vhostfds"] = joinNames(vhosts)
			if dec.BusyPollUS > 0 {
				netdevArgs["poll-us"] = dec.BusyPollUS
			}
		} else {
			netdevArgs["vhost"] = false
		}
	}

	// Pass the fds on this one connection; until netdev_add consumes a
	// name, its undo is closefd. Each undo is pushed before its command:
	// QEMU may have done a command whose answer was lost (the connection
	// broke), and an undo of something that is not there is a no-op.
	consumed := false
	for _, f := range slices.Concat(taps, vhosts) {
		name := f.name
		a.undo.push("closefd "+name, func(ctx context.Context) error {
			if consumed {
				return nil
			}
			return a.qmpUndo(ctx, "closefd", map[string]any{"fdname": name}, "GenericError")
		})
		if err := c.SendFD(ctx, f.name, f.fd); err != nil {
			return nil, step("pass fd "+f.name+" (getfd)", err)
		}
		nic.FDNames = append(nic.FDNames, name)
	}
	netdevRefused := false // QEMU answered netdev_add with an error: the id is not ours to delete
	a.undo.push("netdev_del "+netdev, func(ctx context.Context) error {
		if netdevRefused {
			return nil
		}
		return a.qmpUndo(ctx, "netdev_del", map[string]any{"id": netdev}, "DeviceNotFound")
	})
	if err := c.Run(ctx, "netdev_add", netdevArgs, nil); err != nil {
		netdevRefused = isQEMUError(err)
		return nil, step("netdev_add "+netdev, netdevHint(err))
	}
	consumed = true
	// A netdev whose vhost setup failed can be deleted with only a
	// warning: check it is really there.
	out, err := infoNetwork(ctx, c)
	if err != nil {
		return nil, step("check the netdev", err)
	}
	if _, err := diagnose.ParseInfoNetwork(out, netdev); err != nil {
		return nil, step("check the netdev", fmt.Errorf("netdev_add %s answered but QEMU has no such netdev (a vhost failure QEMU only warned about?): %w", netdev, err))
	}

	dev := map[string]any{"driver": "virtio-net-pci", "id": p.ID, "netdev": netdev, "mac": nic.MAC}
	props := maps.Clone(dec.QEMU)
	if p.Queues > 1 {
		props["mq"] = "on"
		props["vectors"] = fmt.Sprint(2*p.Queues + 2)
	}
	for _, k := range sortedKeys(props) {
		dev[k] = qmpValue(props[k])
		nic.Properties[k] = props[k]
	}
	for k, v := range p.ExtraProps {
		dev[k] = v
	}
	// The record goes in before device_add, so that device_add is the
	// last step and nothing after it can fail.
	if err := store.Save(nic); err != nil {
		return nil, step("record the NIC", err)
	}
	a.undo.push("remove the record", func(context.Context) error { return store.Remove(key, p.ID) })
	// device_add's undo: needed only when QEMU added the device but the
	// answer was lost (the connection broke after QEMU had read the
	// command); then the device goes before its netdev.
	a.undo.push("device_del "+p.ID, func(ctx context.Context) error {
		var ids map[string]bool
		err := a.qmpUndoFn(ctx, func(c *qmp.Client) error {
			var err error
			ids, err = deviceIDs(ctx, c)
			return err
		})
		if err != nil || !ids[p.ID] {
			return err
		}
		return unplug(ctx, a.c, p.ID, 10*time.Second, 5*time.Second)
	})
	if err := c.Run(ctx, "device_add", dev, nil); err != nil {
		return nil, step("device_add virtio-net-pci id="+p.ID, err)
	}
	a.undo.drop()
	return nic, nil
}

// qmpUndo runs an undo command; an error of class ignore (the thing is
// already gone) is not an error.
//
// When the connection broke (QEMU closed it mid-way), getfd names and
// netdevs are still in QEMU (they belong to the monitor, not to the
// connection), so the undo dials the same socket again; when QEMU itself
// is gone there is nothing left to undo in it.
func (a *attacher) qmpUndo(ctx context.Context, cmd string, args any, ignore string) error {
	err := a.qmpUndoFn(ctx, func(c *qmp.Client) error { return c.Run(ctx, cmd, args, nil) })
	if err != nil && ignore != "" && (isClass(err, ignore) || strings.Contains(err.Error(), "not found")) {
		return nil
	}
	return err
}

// qmpUndoFn runs fn on the connection, dialling again once when the
// connection broke; nil when QEMU itself is gone.
func (a *attacher) qmpUndoFn(ctx context.Context, fn func(c *qmp.Client) error) error {
	err := fn(a.c)
	if err != nil && !isQEMUError(err) {
		if a.pid != 0 && !state.SameProcess(a.pid, a.start) {
			return nil // QEMU exited: its fds, netdevs and names went with it
		}
		c, derr := dialQMP(ctx, a.p.QMP)
		if derr != nil {
			return fmt.Errorf("%w; dialling again: %w", err, derr)
		}
		a.c.Close()
		a.c = c
		err = fn(a.c)
	}
	return err
}

// restrictVDPA lets the chain choose only the vdpa device the request
// names: without --vdpa or --mgmtdev, none (a device bound to vhost_vdpa
// may be another VM's).
func restrictVDPA(h *host.Description, p *parsed) {
	if p.VDPA == "" {
		if h.VDPA.Available {
			h.VDPA.Available = false
			h.VDPA.Error = "no --vdpa DEV or --mgmtdev MGMTDEV given"
		}
		h.VDPA.Devices = nil
		return
	}
	var keep []host.VDPADevice
	for _, d := range h.VDPA.Devices {
		if d.Name == p.VDPA {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 && h.VDPA.Available {
		h.VDPA.Available = false
		h.VDPA.Error = "vdpa device " + p.VDPA + " does not exist (netctl vdpa dev show)"
	}
	h.VDPA.Devices = keep
}

func joinNames(fs []passFD) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.name)
	}
	return strings.Join(n, ":")
}

func sortedKeys(m map[string]string) []string {
	k := slices.Collect(maps.Keys(m))
	sort.Strings(k)
	return k
}

// netdevHint adds what to do to netdev_add's common errors.
func netdevHint(err error) error {
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "Duplicate ID"):
		return fmt.Errorf("%w: pick another --id: %w", err, ErrConflict)
	case strings.Contains(err.Error(), "vhost"):
		return fmt.Errorf("%w (QEMU could not start vhost on the fds netctl passed; try --backend userspace)", err)
	}
	return err
}
