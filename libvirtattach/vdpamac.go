package libvirtattach

import (
	"context"
	"fmt"
	"net"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// deviceMAC is the MAC the interface of vdpa device name must carry:
// QEMU gives the guest the device's own MAC (from its config space)
// whenever it has one, whatever the interface's <mac> says, so libvirt's
// bookkeeping, virsh domiflist and the guest would disagree. A device
// without a MAC (or an all-zero one) keeps mac. A device whose MAC
// differs is refused when the user gave --mac (attach with the device's
// MAC, or a management device that takes one: VDUSE's device owner sets
// its MAC, not vdpa dev add); when netctl chose mac, the device's is
// adopted, checked free in the domain under its own MAC lock (taken
// after the NIC's and the first MAC's, like every lock here; the
// returned func releases it).
func deviceMAC(ctx context.Context, c *libvirtdom.Conn, dom libvirtdom.Domain, h hostnic.Host, store *state.Store, r Request, name, alias string, mac net.HardwareAddr) (net.HardwareAddr, func(), error) {
	none := func() {}
	dm, err := h.VDPAMAC(ctx, name)
	if err != nil {
		return nil, none, fmt.Errorf("read its config (vdpa dev config show %s): %w", name, err)
	}
	if dm == nil || dm.String() == mac.String() {
		return mac, none, nil
	}
	if r.MAC != "" {
		return nil, none, fmt.Errorf("vdpa device %s has MAC %s, which the guest would see (QEMU gives the guest a vdpa device's own MAC), not --mac %s: "+
			"attach with --mac %s, or create the device from a management device that takes a MAC: %w", name, dm, mac, dm, errs.ErrConflict)
	}
	mkey := state.LibvirtLockKey(dom.UUID, "mac="+dm.String())
	l, err := store.Lock(ctx, mkey)
	if err != nil {
		return nil, none, fmt.Errorf("lock MAC %s: %w", dm, err)
	}
	release := func() { unlock(store, l, mkey) }
	live, err := c.XML(ctx, dom, false)
	if err == nil {
		x, perr := libvirtdom.ParseDomain(live)
		if err = perr; err == nil {
			err = checkFree(x, alias, dm, r.ID)
		}
	}
	if err != nil {
		release()
		return nil, none, fmt.Errorf("vdpa device %s has MAC %s (the guest sees it): %w", name, dm, err)
	}
	return dm, release, nil
}
