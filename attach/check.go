package attach

import (
	"errors"
	"strings"

	"github.com/netctl/netctl/state"
)

// checkFree refuses an id that netctl's records or QEMU already use
// (a device, a network client, an fdset from an earlier attach), before
// anything changes.
func checkFree(store *state.Store, key, id string, q *qemuState) error {
	netdev := NetdevID(id)
	if _, err := store.Load(key, id); err == nil {
		return inUse("netctl already attached a NIC %s to this VM: pick another --id, or netctl detach --id %s first (netctl list shows them)", id, id)
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if q.Devices[id] {
		return inUse("QEMU already has a device with id %s: pick another --id", id)
	}
	if q.Netdevs[netdev] || q.Netdevs[id] {
		return inUse("QEMU already has a network client %s: pick another --id", netdev)
	}
	fdPrefix := "netctl-" + id + "-"
	for _, s := range q.FDSets {
		for _, f := range s.FDs {
			if strings.HasPrefix(f.Opaque, fdPrefix) {
				return inUse("QEMU's fdset %d holds %q from an earlier netctl attach of %s: remove it (remove-fd fdset-id=%d) or pick another --id", s.ID, f.Opaque, id, s.ID)
			}
		}
	}
	return nil
}
