package libvirtattach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// DetachRequest is one detach from a libvirt domain.
type DetachRequest struct {
	URI      string
	Domain   string // by name or UUID
	ID       string
	StateDir string
	// Wait bounds the wait for libvirt's device-removed event (0: 20 s).
	// When the guest has not released the NIC by then, the record stays
	// as detach-timeout and the tap is kept; detach again finishes it.
	Wait time.Duration
	Host hostnic.Host // nil hostnic.Real{}
}

// ErrPending: the guest has not released the NIC yet (libvirtdom's).
var ErrPending = libvirtdom.ErrPending

// Detach removes NIC r.ID netctl attached to domain r.Domain: libvirt
// unplugs it (live, and from the persistent definition when it was
// attached with Persistent), netctl waits for the device-removed event,
// then deletes the tap or vdpa device it made and the record.
func Detach(ctx context.Context, r DetachRequest) error {
	h := r.Host
	if h == nil {
		h = hostnic.Real{}
	}
	if r.Wait <= 0 {
		r.Wait = 20 * time.Second
	}
	if err := state.CheckID(r.ID); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	c, err := libvirtdom.Dial(ctx, r.URI)
	if err != nil {
		return fmt.Errorf("detach: connect to libvirt: %w", err)
	}
	defer c.Close()
	store, err := state.Open(r.StateDir)
	if err != nil {
		return fmt.Errorf("detach: state: %w", err)
	}
	dom, err := c.Lookup(ctx, r.Domain)
	if errors.Is(err, os.ErrNotExist) {
		// A transient domain that was destroyed: libvirt no longer knows
		// it, and its QEMU (with the NIC) is gone. What netctl made stays.
		return cleanGone(ctx, store, h, c.URI, r)
	}
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	key := state.LibvirtKey(dom.UUID)
	lkey := state.LibvirtLockKey(dom.UUID, r.ID)
	lock, err := store.Lock(ctx, lkey)
	if err != nil {
		return fmt.Errorf("detach: lock the NIC: %w", err)
	}
	defer unlock(store, lock, lkey)
	nic, err := store.Load(key, r.ID)
	if errors.Is(err, state.ErrNotFound) {
		if found, err := detachRestarted(ctx, c, dom, h, r); found {
			return err
		}
		return fmt.Errorf("detach: netctl has no NIC %s on domain %s (netctl list shows what it attached): %w", r.ID, dom.Name, state.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	if nic.Libvirt == nil || nic.Libvirt.UUID != dom.UUID {
		return fmt.Errorf("detach: the record of NIC %s is not this domain's: %w", r.ID, errs.ErrInvalid)
	}
	alias := nic.Libvirt.Alias

	if err := unplug(ctx, c, dom, nic, r.Wait); err != nil {
		if errors.Is(err, ErrPending) {
			nic.Status, nic.Note = state.StatusDetachTimeout, err.Error()
			if serr := store.Save(nic); serr != nil {
				err = fmt.Errorf("%w; and saving the record failed: %w", err, serr)
			}
			return fmt.Errorf("detach: %w: the tap stays until the guest releases %s; run netctl detach again", err, alias)
		}
		return fmt.Errorf("detach: %w", err)
	}
	if err := deleteHost(ctx, h, nic, "the NIC is out of the domain; "); err != nil {
		return err
	}
	if err := store.Remove(key, r.ID); err != nil {
		return fmt.Errorf("detach: remove the record: %w", err)
	}
	return nil
}

// unplug asks libvirt to remove the NIC's interface and waits for it to
// be gone from the live domain. An interface already gone (a detach that
// was interrupted, the domain restarted) is no error.
func unplug(ctx context.Context, c *libvirtdom.Conn, dom libvirtdom.Domain, nic *state.NIC, wait time.Duration) error {
	alias := nic.Libvirt.Alias
	if nic.Libvirt.Persistent {
		if err := detachConfig(ctx, c, dom, alias); err != nil {
			return err
		}
	}
	run, err := c.Running(ctx, dom)
	if err != nil {
		return err
	}
	if !run {
		return nil // no live NIC: libvirt released its QEMU's
	}
	x, err := liveInterface(ctx, c, dom, alias)
	if err != nil || x == "" {
		return err
	}
	rm, err := c.WatchRemoved(ctx, dom)
	if err != nil {
		return err
	}
	defer rm.Close()
	if err := c.Detach(ctx, dom, x, libvirtdom.Live); err != nil {
		// Gone meanwhile: fine.
		if again, lerr := liveInterface(ctx, c, dom, alias); lerr == nil && again == "" {
			return nil
		}
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := rm.Wait(wctx, alias); err != nil {
		// The event may have come before the watch saw it: ask again.
		if again, lerr := liveInterface(ctx, c, dom, alias); lerr == nil && again == "" {
			return nil
		}
		return err
	}
	return nil
}

// liveInterface is the live domain's interface with alias, as XML for
// Detach, or "" when it has none.
func liveInterface(ctx context.Context, c *libvirtdom.Conn, dom libvirtdom.Domain, alias string) (string, error) {
	b, err := c.XML(ctx, dom, false)
	if err != nil {
		return "", err
	}
	x, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return "", err
	}
	if x.Devices == nil {
		return "", nil
	}
	for i := range x.Devices.Interfaces {
		it := &x.Devices.Interfaces[i]
		if libvirtdom.Alias(it) == alias {
			return it.Marshal()
		}
	}
	return "", nil
}

// detachConfig removes the interface with alias from the persistent
// definition, if it is there.
func detachConfig(ctx context.Context, c *libvirtdom.Conn, dom libvirtdom.Domain, alias string) error {
	b, err := c.XML(ctx, dom, true)
	if err != nil {
		return err
	}
	x, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return err
	}
	if x.Devices == nil {
		return nil
	}
	for i := range x.Devices.Interfaces {
		it := &x.Devices.Interfaces[i]
		if libvirtdom.Alias(it) == alias {
			s, err := it.Marshal()
			if err != nil {
				return err
			}
			return c.Detach(ctx, dom, s, libvirtdom.Config)
		}
	}
	return nil
}

// cleanGone deletes the tap and the record of NIC r.ID of a domain
// libvirt (uri, the connection's) no longer knows (named by r.Domain, its
// name or UUID in the record). Only a record made through uri is this
// libvirt's: one of a domain of that name on another libvirtd is that
// running domain's NIC, and is left with an error naming its URI.
func cleanGone(ctx context.Context, store *state.Store, h hostnic.Host, uri string, r DetachRequest) error {
	recs, _, err := store.List("")
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	var found, elsewhere []*state.NIC
	for _, n := range recs {
		if n.Libvirt != nil && n.ID == r.ID && (n.VM == r.Domain || n.Libvirt.UUID == r.Domain) {
			if n.Libvirt.URI != uri {
				elsewhere = append(elsewhere, n)
				continue
			}
			found = append(found, n)
		}
	}
	if len(found) == 0 && len(elsewhere) > 0 {
		n := elsewhere[0]
		return fmt.Errorf("detach: libvirt at %s has no domain %s; NIC %s of a domain of that name (%s) was attached through %s: run netctl detach --libvirt %s --vm %s --id %s: %w",
			uri, r.Domain, r.ID, n.Libvirt.UUID, n.Libvirt.URI, n.Libvirt.URI, n.Libvirt.UUID, r.ID, os.ErrNotExist)
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("detach: libvirt has no domain %s and netctl has no NIC %s on one of that name (netctl list): %w", r.Domain, r.ID, os.ErrNotExist)
	case 1:
	default:
		return fmt.Errorf("detach: %d gone domains named %s had NIC %s: name the domain by its UUID (netctl list): %w", len(found), r.Domain, r.ID, errs.ErrInvalid)
	}
	n := found[0]
	key := n.Key()
	lkey := state.LibvirtLockKey(n.Libvirt.UUID, n.ID)
	lock, err := store.Lock(ctx, lkey)
	if err != nil {
		return fmt.Errorf("detach: lock the NIC: %w", err)
	}
	defer unlock(store, lock, lkey)
	if err := deleteHost(ctx, h, n, ""); err != nil {
		return err
	}
	if err := store.Remove(key, n.ID); err != nil {
		return fmt.Errorf("detach: remove the record: %w", err)
	}
	return nil
}

// detachRestarted detaches NIC r.ID that netctl attach --persistent gave
// the domain before it was restarted: the release that ended that run
// removed the record, and at the start the hook made the tap again (its
// own record holds it until the next release). It acts only on an
// interface with netctl's alias whose tap is the one --persistent names
// (PersistentTapName): out of the definition and the live domain, then
// the tap, while it carries netctl's mark. found is false when the domain
// has no such interface.
func detachRestarted(ctx context.Context, c *libvirtdom.Conn, dom libvirtdom.Domain, h hostnic.Host, r DetachRequest) (found bool, err error) {
	alias, tap := Alias(r.ID), PersistentTapName(dom.UUID, r.ID)
	for _, config := range []bool{true, false} {
		b, err := c.XML(ctx, dom, config)
		if err != nil {
			return false, nil
		}
		x, err := libvirtdom.ParseDomain(b)
		if err != nil || x.Devices == nil {
			continue
		}
		for i := range x.Devices.Interfaces {
			it := &x.Devices.Interfaces[i]
			if libvirtdom.Alias(it) == alias && it.Target != nil && it.Target.Dev == tap {
				found = true
			}
		}
	}
	if !found {
		return false, nil
	}
	nic := &state.NIC{ID: r.ID, Libvirt: &state.Libvirt{UUID: dom.UUID, Alias: alias, Persistent: true}}
	if err := unplug(ctx, c, dom, nic, r.Wait); err != nil {
		if errors.Is(err, ErrPending) {
			return true, fmt.Errorf("detach: %w: the tap stays until the guest releases %s; run netctl detach again", err, alias)
		}
		return true, fmt.Errorf("detach: %w", err)
	}
	if ix := h.MarkedTapIndex(tap); ix != 0 {
		if _, err := h.DeleteTap(tap, ix); err != nil {
			return true, fmt.Errorf("detach: delete tap %s (the NIC is out of the domain): %w", tap, err)
		}
	}
	return true, nil
}

// deleteHost deletes what netctl made for nic: its tap (only while it
// carries netctl's mark and the recorded ifindex) and its vdpa device
// (only while it is the device netctl created: deleteVDPA).
func deleteHost(ctx context.Context, h hostnic.Host, nic *state.NIC, said string) error {
	if nic.Tap != nil && nic.Tap.Created {
		if _, err := h.DeleteTap(nic.Tap.Name, nic.Tap.Ifindex); err != nil {
			return fmt.Errorf("detach: delete tap %s (%sthe record stays: run netctl detach again): %w", nic.Tap.Name, said, err)
		}
	}
	if err := deleteVDPA(ctx, h, nic.VDPA); err != nil {
		return fmt.Errorf("detach: delete vdpa device %s (%sthe record stays: run netctl detach again): %w", nic.VDPA.Name, said, err)
	}
	return nil
}
