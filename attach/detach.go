package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// DefaultDetachTimeout is how long Detach waits for DEVICE_DELETED.
const DefaultDetachTimeout = 30 * time.Second

// Detach takes NIC req.ID away from the VM: device_del, then wait for
// DEVICE_DELETED (sending device_del again every req.Retry, and taking
// "already in the process of unplug" as a yes), then netdev_del,
// remove-fd for the record's fdsets, delete what netctl created, and
// remove the record. A guest that does not release the NIC in time leaves
// the record with status detach-timeout and an ErrTimeout error: nothing
// else is touched, and detach can be run again. When QEMU is gone (exited,
// or its pid now belongs to another process) only the host side is
// cleaned up.
//
// Equivalent: device_del id=ID; (DEVICE_DELETED); netdev_del id=netctl-ID.
func Detach(ctx context.Context, r DetachRequest) error {
	if r.QMP == "" {
		return fmt.Errorf("detach: no QMP socket: name it (--qmp SOCKET) or the VM (--vm NAME): %w", ErrInvalid)
	}
	if err := state.CheckID(r.ID); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	if abs, err := filepath.Abs(r.QMP); err == nil {
		r.QMP = abs
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultDetachTimeout
	}
	if r.Retry <= 0 {
		r.Retry = 5 * time.Second
	}
	h := r.Host
	if h == nil {
		h = RealHost{}
	}
	store, err := state.Open(r.StateDir)
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	lock, err := store.Lock(ctx, state.LockKey(r.QMP))
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	defer lock.Unlock()
	c, dialErr := dialQMP(ctx, r.QMP)
	vm := r.VMName
	if dialErr == nil {
		defer c.Close()
		if vm == "" {
			var name struct {
				Name string `json:"name"`
			}
			if err := c.Run(ctx, "query-name", nil, &name); err != nil {
				return fmt.Errorf("detach: query-name: %w (is the socket QEMU's QMP monitor?)", err)
			}
			vm = name.Name
		}
	}
	key := state.KeyFor(vm, r.QMP)
	nic, err := store.Load(key, r.ID)
	if errors.Is(err, state.ErrNotFound) {
		// QEMU is gone (its name is unknown), or the NIC was attached
		// under another name for the VM: find the record by its socket.
		if n := findBySocket(store, r.QMP, r.ID); n != nil {
			nic, err, key = n, nil, n.Key()
		}
	}
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("detach: netctl has no NIC %s on this VM (netctl list shows what it attached): %w", r.ID, ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	// A link netctl created lives in the namespace it attached from; a
	// link here with the same name and ifindex is another one (ifindexes
	// are per namespace). Refuse before changing anything.
	if here, err := state.NetNS(); err == nil && here != 0 && nic.NetNS != 0 && nic.NetNS != here &&
		((nic.Tap != nil && nic.Tap.Created) || (nic.Macvtap != nil && nic.Macvtap.Created)) {
		return fmt.Errorf("detach: netctl attached NIC %s from another network namespace (net:[%d]; this is net:[%d]), where the link it created is: "+
			"run netctl detach there (ip netns exec NAME netctl detach ...): %w", r.ID, nic.NetNS, here, ErrConflict)
	}
	other, err := lockRecordSocket(store, nic, r.QMP)
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	defer other.Unlock()
	interrupted := nic.Status == state.StatusAttaching // an attach that was killed: this holds the lock
	if interrupted {
		resolveIntent(h, nic)
		vdpaInOtherRecord(store, nic)
	}
	alive := state.SameProcess(nic.QEMUPID, nic.QEMUStart)
	if dialErr != nil && alive {
		return fmt.Errorf("detach: connect to QEMU (pid %d): %w", nic.QEMUPID, dialErr)
	}
	if alive && dialErr == nil {
		if pid, err := c.PeerPID(); err == nil && pid != nic.QEMUPID {
			// The recorded QEMU still has the NIC, on its link, but
			// another process serves the socket now (a second QEMU
			// bound the same path): nothing here can unplug it, and
			// deleting the link would pull it from under that QEMU.
			return fmt.Errorf("detach: QEMU pid %d, which has NIC %s, still runs, but pid %d serves %s now: netctl cannot reach it to unplug the NIC. "+
				"Stop QEMU pid %d (netctl gc then cleans up), or give it back a QMP socket: %w", nic.QEMUPID, nic.ID, pid, r.QMP, nic.QEMUPID, ErrConflict)
		}
	}
	if alive && interrupted {
		ids, err := deviceIDs(ctx, c)
		if err == nil {
			_, err = undoInterruptedQEMU(ctx, c, ids, nic, false)
		}
		if err != nil {
			return fmt.Errorf("detach: NIC %s is an attach that was interrupted; undoing it in QEMU: %w", r.ID, err)
		}
	} else if alive {
		nic.Status, nic.Note = state.StatusDetaching, ""
		if err := store.Save(nic); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
		if err := unplug(ctx, c, nic.ID, r.Timeout, r.Retry); err != nil {
			nic.Status, nic.Note = state.StatusDetachTimeout, err.Error()
			if serr := store.Save(nic); serr != nil {
				err = errors.Join(err, serr)
			}
			return fmt.Errorf("detach: %w", err)
		}
		if err := c.Run(ctx, "netdev_del", map[string]any{"id": nic.Netdev}, nil); err != nil && !isClass(err, "DeviceNotFound") {
			return fmt.Errorf("detach: netdev_del %s: %w (the device is gone; run detach again to finish)", nic.Netdev, err)
		}
		for _, set := range nic.FDSets {
			if err := c.Run(ctx, "remove-fd", map[string]any{"fdset-id": set}, nil); err != nil && !strings.Contains(err.Error(), "not found") {
				return fmt.Errorf("detach: remove-fd fdset-id=%d: %w", set, err)
			}
		}
	}
	if err := cleanupHost(ctx, h, nic); err != nil {
		return fmt.Errorf("detach: %w (run detach again to retry)", err)
	}
	if err := store.Remove(key, nic.ID); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	return nil
}

func findBySocket(store *state.Store, sock, id string) *state.NIC {
	all, _, err := store.List("")
	if err != nil {
		return nil
	}
	for _, n := range all {
		if n.QMP == sock && n.ID == id {
			return n
		}
	}
	return nil
}

// cleanupHost deletes what netctl created for nic (a tap that is still
// there, a macvtap, a vdpa device).
func cleanupHost(ctx context.Context, h Host, nic *state.NIC) error {
	var errs []error
	for i, l := range []*state.Link{nic.Tap, nic.Macvtap} {
		if l != nil && l.Created && hostnic.NotCreatedLink([]string{"tap", "macvtap"}[i], l) == "" {
			if err := h.DeleteLink(l.Name, l.Ifindex); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if nic.VDPA != nil && nic.VDPA.Created && hostnic.NotCreatedVDPA(nic.VDPA) == "" {
		if err := h.DeleteVDPA(ctx, nic.VDPA.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unplug sends device_del for id and waits for its DEVICE_DELETED, or for
// the id to be gone from /machine/peripheral (an earlier request may have
// completed while nobody listened).
func unplug(ctx context.Context, c *qmp.Client, id string, timeout, retry time.Duration) error {
	deadline := time.Now().Add(timeout)
	send := func() error {
		err := c.Run(ctx, "device_del", map[string]any{"id": id}, nil)
		switch {
		case err == nil, unplugUnderWay(err):
			return nil
		case isClass(err, "DeviceNotFound"):
			return errGone
		}
		return fmt.Errorf("device_del %s: %w", id, err)
	}
	switch err := send(); {
	case errors.Is(err, errGone):
		return nil
	case err != nil:
		return err
	}
	lastSend := time.Now()
	for {
		if deleted(c.Events(), id) {
			return nil
		}
		ids, err := deviceIDs(ctx, c) // also lets events in
		if err != nil {
			return err
		}
		if deleted(c.Events(), id) || !ids[id] {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest did not release NIC %s within %v (no DEVICE_DELETED): a guest without PCI hotplug support, or one that is paused or still booting, "+
				"does not answer; QEMU may still complete it later. Run netctl detach again, or cont a paused VM: %w", id, timeout, ErrTimeout)
		}
		if time.Since(lastSend) >= retry {
			if err := send(); errors.Is(err, errGone) {
				return nil
			} else if err != nil {
				return err
			}
			lastSend = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for DEVICE_DELETED of %s: %w", id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errGone = errors.New("device not found")

// unplugUnderWay says whether QEMU refused a repeated device_del because
// the first one is still running: "Device ID is already in the process
// of unplug" (qdev-monitor.c), or, on native PCIe hotplug while the
// guest's pciehp waits its 5 s, "Hot-unplug failed: guest is busy (power
// indicator blinking)" (QEMU 7.2's pcie_cap_slot_unplug_request_cb).
func unplugUnderWay(err error) bool {
	return isClass(err, "GenericError") &&
		(strings.Contains(err.Error(), "in the process of unplug") || strings.Contains(err.Error(), "power indicator blinking"))
}

// deleted says whether events hold DEVICE_DELETED for device id.
func deleted(evs []qmp.Event, id string) bool {
	for _, e := range evs {
		if e.Event != "DEVICE_DELETED" {
			continue
		}
		var d struct {
			Device string `json:"device"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Device == id {
			return true
		}
	}
	return false
}
