package attach

import (
	"context"
	"fmt"
	"time"

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
	key := ""
	if r.VMName != "" {
		key = state.VMKey(r.VMName)
	}
	recs, bad, err := store.List(key)
	if err != nil {
		return nil, nil, fmt.Errorf("list: %w", err)
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
