package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/vdpa"
)

// openBackend creates or opens the backend the decision names and the
// vhost fds, records them in nic, and returns the fds to pass (tap queues,
// vhost fds) and netdev_add's arguments. netctl's copies are closed when
// Attach returns (a.fds, a.backend); a created link's undo is pushed.
func (a *attacher) openBackend(ctx context.Context, dec policy.Decision, nic *state.NIC, fdPrefix string) (taps, vhosts []passFD, netdevArgs map[string]any, err error) {
	p := a.p
	netdevArgs = map[string]any{}
	switch dec.Backend {
	case policy.BackendVDPA:
		if p.Mgmtdev != "" {
			nic.VDPA = &state.VDPA{Name: p.VDPA, Mgmtdev: p.Mgmtdev, Created: true}
		} else {
			nic.VDPA = &state.VDPA{Name: p.VDPA}
		}
		fd, path, err := a.h.OpenVDPA(ctx, p.VDPA)
		if err != nil {
			return nil, nil, nil, step("open vdpa device "+p.VDPA, err)
		}
		a.fds = append(a.fds, fd)
		nic.VDPA.Vhost = path
		if a.h.VDPAMapMode(fd) == vdpa.MapVA {
			if err := checkSharedRAM(ctx, a.c); err != nil {
				return nil, nil, nil, step("check the VM's memory for vdpa device "+p.VDPA, err)
			}
		}
		vhosts = append(vhosts, passFD{fdPrefix + "vdpa0", fd})
		netdevArgs["type"] = "vhost-vdpa"
		netdevArgs["vhostfd"] = fdPrefix + "vdpa0"
	default:
		var b Backend
		if p.mvLower != "" {
			b, err = a.createMacvtap(nic)
			if err != nil {
				return nil, nil, nil, step("create a macvtap on "+p.mvLower, err)
			}
			nic.Macvtap.Ifindex = b.Ifindex()
		} else {
			spec := TapSpec{Name: p.Tap, Queues: p.Queues, MTU: p.MTU, Shared: p.SharedTap}
			if p.Tap == "" {
				spec.Name, spec.Create, spec.MAC = hostnic.TapTemplate, true, tapMAC(p.mac)
			}
			b, err = a.h.OpenTap(spec)
			if err != nil {
				return nil, nil, nil, step("open the tap", err)
			}
			nic.Tap = &state.Link{Name: b.Name(), Ifindex: b.Ifindex(), Created: spec.Create}
		}
		a.backend = b
		a.undo.push("remove "+b.Name(), func(context.Context) error { return b.Destroy() })
		if b.Queues() != p.Queues {
			return nil, nil, nil, step("open the backend", fmt.Errorf("%s has %d queues open, want %d", b.Name(), b.Queues(), p.Queues))
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
					return nil, nil, nil, step(fmt.Sprintf("open /dev/vhost-net for queue pair %d", i), err)
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

	return taps, vhosts, netdevArgs, nil
}

// createMacvtap names the macvtap in the record before it creates it
// (ifindex 0 until it exists: a record still attaching finds it by name,
// lower device and MAC, which the kernel sets at creation), so that a
// kill right after the creation leaves a record naming it.
func (a *attacher) createMacvtap(nic *state.NIC) (Backend, error) {
	p := a.p
	n := 0
	for tries := 0; tries < 64; tries++ {
		for ; n < 1<<16 && a.h.LinkExists(fmt.Sprintf(hostnic.MacvtapTemplate, n), 0); n++ {
		}
		name := fmt.Sprintf(hostnic.MacvtapTemplate, n)
		nic.Macvtap = &state.Link{Name: name, Lower: p.mvLower, Mode: p.mvMode.String(), Created: true}
		if err := a.record("the macvtap to create"); err != nil {
			nic.Macvtap = nil
			return nil, err
		}
		b, err := a.h.CreateMacvtap(MacvtapSpec{Name: name, Lower: p.mvLower, Mode: p.mvMode, Queues: p.Queues, MTU: p.MTU, MAC: p.mac})
		if errors.Is(err, ErrConflict) {
			n++ // taken since it was looked at: the next one
			continue
		}
		if err != nil {
			nic.Macvtap = nil
			if rerr := a.record("that no macvtap was created"); rerr != nil {
				return nil, fmt.Errorf("%w; and %w", err, rerr)
			}
			return nil, err
		}
		return b, nil
	}
	nic.Macvtap = nil
	return nil, fmt.Errorf("every name tried was taken while netctl created it: %w", ErrConflict)
}

func joinNames(fs []passFD) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.name)
	}
	return strings.Join(n, ":")
}
