package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// List returns netctl's records (of one VM, or all), each checked against
// its QEMU when it can be reached: QEMU gone or the device missing gives
// Present "gone" (netctl gc cleans those up); a QEMU that cannot be asked (its monitor busy with
// another client) gives "unknown" and why. Records that cannot be read
// are skipped and handed to r.Unreadable (each error names its file);
// List fails only when the state directory cannot be read.
func List(ctx context.Context, r ListRequest) ([]Listed, error) {
	nics, bad, err := list(ctx, r)
	if r.Unreadable != nil {
		for _, b := range bad {
			r.Unreadable(b)
		}
	}
	return nics, err
}

func list(ctx context.Context, r ListRequest) (nics []Listed, bad []error, err error) {
	store, err := state.Open(r.StateDir)
	if err != nil {
		return nil, nil, fmt.Errorf("list: %w", err)
	}
	all, bad, err := store.List("")
	if err != nil {
		return nil, nil, fmt.Errorf("list: %w", err)
	}
	// --vm NAME: a hand-run QEMU's records are under its name's key; a
	// libvirt domain's under its UUID, with the name in the record.
	var recs []*state.NIC
	for _, n := range all {
		if r.VMName == "" || n.Key() == state.VMKey(r.VMName) || (n.Libvirt != nil && (n.VM == r.VMName || n.Libvirt.UUID == r.VMName)) {
			recs = append(recs, n)
		}
	}
	if r.CheckTimeout <= 0 {
		r.CheckTimeout = 2 * time.Second
	}
	// One connection per QMP socket.
	type answer struct {
		ids map[string]bool
		err error
	}
	asked := map[string]answer{}
	h := r.Host
	if h == nil {
		h = RealHost{}
	}
	domains := map[string]libvirtAnswer{} // per URI and UUID: asked once
	for _, n := range recs {
		l := Listed{NIC: n}
		for _, k := range []*state.Link{n.Tap, n.Macvtap} {
			if k != nil {
				l.Link = "missing"
				if h.LinkExists(k.Name, k.Ifindex) {
					l.Link = "present"
				}
			}
		}
		switch {
		case n.Libvirt != nil:
			l.Present, l.Check = libvirtPresent(ctx, n, r.CheckTimeout, domains)
		case !state.SameProcess(n.QEMUPID, n.QEMUStart):
			l.Present, l.Check = "gone", fmt.Sprintf("QEMU pid %d has exited: run netctl gc to clean up", n.QEMUPID)
		default:
			a, ok := asked[n.QMP]
			if !ok {
				a.ids, a.err = peripheralIDs(ctx, n.QMP, r.CheckTimeout)
				asked[n.QMP] = a
			}
			switch {
			case a.err != nil:
				l.Present, l.Check = "unknown", a.err.Error()
			case a.ids[n.ID]:
				l.Present = "yes"
			default:
				l.Present, l.Check = "gone", "QEMU has no device "+n.ID+": run netctl detach --id "+n.ID+" (or netctl gc) to clean up"
			}
		}
		nics = append(nics, l)
	}
	return nics, bad, nil
}

func peripheralIDs(ctx context.Context, sock string, timeout time.Duration) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dialQMP(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return deviceIDs(ctx, c)
}

// libvirtAnswer is what libvirt said about one domain: its live
// interfaces' aliases, or why it could not say.
type libvirtAnswer struct {
	running bool
	aliases map[string]bool
	err     error
}

// libvirtPresent asks libvirt whether the domain of a NIC netctl attached
// through libvirt runs and has the NIC's interface (by its alias).
func libvirtPresent(ctx context.Context, n *state.NIC, timeout time.Duration, asked map[string]libvirtAnswer) (present, check string) {
	k := n.Libvirt.URI + " " + n.Libvirt.UUID
	a, ok := asked[k]
	if !ok {
		a = askLibvirt(ctx, n.Libvirt.URI, n.Libvirt.UUID, timeout)
		asked[k] = a
	}
	detach := "netctl detach --vm " + n.Libvirt.UUID + " --id " + n.ID
	switch {
	case errors.Is(a.err, libvirtdom.ErrUnreachable):
		return "unknown", a.err.Error()
	case errors.Is(a.err, os.ErrNotExist):
		return "gone", "libvirt has no domain " + n.Libvirt.UUID + " any more: " + detach + " deletes what netctl made"
	case a.err != nil:
		return "unknown", a.err.Error()
	case !a.running:
		return "gone", "libvirt domain " + n.Libvirt.UUID + " is not running: " + detach + " deletes what netctl made"
	case a.aliases[n.Libvirt.Alias]:
		return "yes", ""
	}
	return "gone", "the domain has no interface " + n.Libvirt.Alias + " any more: " + detach + " deletes what netctl made"
}

func askLibvirt(ctx context.Context, uri, uuid string, timeout time.Duration) libvirtAnswer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := libvirtdom.Dial(ctx, uri)
	if err != nil {
		return libvirtAnswer{err: err}
	}
	defer c.Close()
	d, err := c.Lookup(ctx, uuid)
	if err != nil {
		return libvirtAnswer{err: err}
	}
	run, err := c.Running(ctx, d)
	if err != nil || !run {
		return libvirtAnswer{err: err}
	}
	b, err := c.XML(ctx, d, false)
	if err != nil {
		return libvirtAnswer{err: err}
	}
	x, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return libvirtAnswer{err: err}
	}
	a := libvirtAnswer{running: true, aliases: map[string]bool{}}
	if x.Devices != nil {
		for i := range x.Devices.Interfaces {
			a.aliases[libvirtdom.Alias(&x.Devices.Interfaces[i])] = true
		}
	}
	return a
}
