package attach

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/state"
)

// decide creates the vdpa device first when --mgmtdev asks for one (it
// must exist to be probed; its undo is pushed), probes the host and asks
// policy.Decide, for the running QEMU's version.
func (a *attacher) decide(ctx context.Context, version string) (policy.Decision, error) {
	p := a.p
	if p.Mgmtdev != "" {
		// The device must exist to be probed: create it first (undone
		// on any later failure, including a decision against it).
		name := hostnic.VDPAName(p.ID)
		// MAC, MTU and max_vqp go to the device only when asked for: a
		// management device may refuse config attributes (VDUSE does).
		spec := VDPASpec{Name: name, Mgmtdev: p.Mgmtdev, MTU: p.MTU, Pin: p.Pool}
		if p.MAC != "" {
			spec.MAC = p.mac
		}
		if p.Queues > 1 {
			spec.MaxVQP = p.Queues
		}
		// The intent record names only a device attach may create: one
		// of that name that exists is someone else's (a record naming it
		// would have gc, detach or a retried attach delete it).
		if a.h.VDPAExists(name) {
			return policy.Decision{}, step("create vdpa device on "+p.Mgmtdev, fmt.Errorf("a vdpa device called %s exists (vdpa dev show %s): "+
				"netctl creates a device of its own with that name; delete it (vdpa dev del %s) if it is no one's, or choose another --id: %w", name, name, name, ErrConflict))
		}
		a.nic.VDPA = &state.VDPA{Name: name, Mgmtdev: p.Mgmtdev, Created: true}
		if err := a.record("the vdpa device to create"); err != nil {
			return policy.Decision{}, err
		}
		if _, err := a.h.CreateVDPA(ctx, spec); err != nil {
			if errors.Is(err, unix.EEXIST) {
				// Made by someone else since it was looked at.
				a.nic.VDPA = nil
				if rerr := a.record("that no vdpa device was created"); rerr != nil {
					err = fmt.Errorf("%w; and %w", err, rerr)
				}
			}
			return policy.Decision{}, step("create vdpa device on "+p.Mgmtdev, err)
		}
		a.undo.push("vdpa dev del "+name, func(ctx context.Context) error { return a.h.DeleteVDPA(ctx, name) })
		p.VDPA = name
	}
	probeFn := p.Probe
	if probeFn == nil {
		probeFn = func(ctx context.Context) (*host.Description, error) { return a.h.Probe(ctx, probeSpecFor(p)) }
	}
	desc, err := probeFn(ctx)
	if err != nil {
		return policy.Decision{}, step("probe the host", err)
	}
	d2 := *desc
	desc = &d2
	desc.QEMU.Version = version // the running QEMU decides the properties
	desc.QEMU.Error = ""
	restrictVDPA(desc, p)
	dec, err := policy.Decide(desc, policy.Request{Backend: p.Backend, Queues: p.Queues, Profile: p.Profile, QEMU: version, Pool: p.Pool, Enable: p.Require})
	if err != nil {
		// A forced backend that is not here: policy's error gives that
		// backend's own reason.
		return policy.Decision{}, step("choose the backend", err)
	}
	if dec.Backend != policy.BackendVDPA && p.Mgmtdev != "" {
		// Created for nothing: remove it now (its undo is the last one
		// pushed), then take it out of the record.
		if err := a.undo.runTop(ctx); err != nil {
			return policy.Decision{}, step("remove the unused vdpa device", err)
		}
		p.VDPA = ""
		a.nic.VDPA = nil
		if err := a.record("the vdpa device's removal"); err != nil {
			return policy.Decision{}, err
		}
	}

	return dec, nil
}

// restrictVDPA lets the chain choose only the vdpa device the request
// names: without --vdpa or --mgmtdev, none (a device bound to vhost_vdpa
// may be another VM's).
func restrictVDPA(h *host.Description, p *parsed) {
	if p.VDPA == "" {
		if h.VDPA.Available || h.VDPA.Error == probe.VDPANotAsked {
			h.VDPA.Available = false
			h.VDPA.Error = "no --vdpa DEV or --mgmtdev MGMTDEV given (a device bound to vhost_vdpa may be another VM's): " +
				"netctl vdpa dev show lists the devices, netctl vdpa mgmtdev show the management devices"
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
