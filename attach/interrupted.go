package attach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// An attach that was killed (SIGKILL, an OOM kill, a second Ctrl-C)
// leaves its record with status attaching (state.StatusAttaching): it
// names the vdpa device and macvtap attach was about to create, the
// getfd names it was about to pass, and the netdev. Whoever next holds
// the VM's lock (netctl gc, detach, or the same attach again) undoes it
// with undoInterruptedQEMU (the recorded QEMU's side) and the host
// cleanup (resolveIntent first), then removes the record.

// resolveIntent fills in the ifindex of a macvtap an attaching record
// names by name only (it was recorded before it was created): the link
// of that name that is a macvtap on the recorded lower device with the
// NIC's MAC (the kernel set all three at creation) is netctl's; if there
// is none it was never created (or is gone) and the record's macvtap is
// dropped. It says what it found, or "".
func resolveIntent(h Host, n *state.NIC) string {
	if n.Status != state.StatusAttaching || n.Macvtap == nil || !n.Macvtap.Created || n.Macvtap.Ifindex != 0 {
		return ""
	}
	mac, err := net.ParseMAC(n.MAC)
	if err == nil {
		if ix := h.FindMacvtap(n.Macvtap.Name, n.Macvtap.Lower, mac); ix > 0 {
			n.Macvtap.Ifindex = ix
			return ""
		}
	}
	name, lower := n.Macvtap.Name, n.Macvtap.Lower
	n.Macvtap = nil
	return fmt.Sprintf("macvtap %s was never created (or is gone): no macvtap of that name on %s with address %s", name, lower, n.MAC)
}

// undoInterruptedQEMU takes out of the recorded QEMU (c, its monitor;
// devices, its device ids) what an interrupted attach may have put in:
// the netdev, then the getfd names still parked (each holds a tap queue
// or a vhost fd). Something already gone is not an error. A device with
// the NIC's id means the attach got further than its record says: then
// nothing is touched.
func undoInterruptedQEMU(ctx context.Context, c *qmp.Client, devices map[string]bool, n *state.NIC, dry bool) (done []string, err error) {
	if devices[n.ID] {
		return nil, fmt.Errorf("QEMU has a device %s though the record says its attach never got to device_add: run netctl detach --id %s: %w", n.ID, n.ID, ErrConflict)
	}
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	var errs []error
	if !dry {
		if err := c.Run(ctx, "netdev_del", map[string]any{"id": n.Netdev}, nil); err != nil && !isClass(err, "DeviceNotFound") && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, fmt.Errorf("netdev_del %s: %w", n.Netdev, err))
		}
	}
	done = append(done, fmt.Sprintf("%s netdev %s in QEMU (if there)", verb, n.Netdev))
	for _, name := range n.FDNames {
		if !dry {
			if err := c.Run(ctx, "closefd", map[string]any{"fdname": name}, nil); err != nil && !strings.Contains(err.Error(), "not found") {
				errs = append(errs, fmt.Errorf("closefd %s: %w", name, err))
				continue
			}
		}
		done = append(done, fmt.Sprintf("%s fd %s in QEMU (if there)", verb, name))
	}
	return done, errors.Join(errs...)
}

// checkID refuses an id in use. A record of this id still attaching is
// an attach that was killed (this attach holds the VM's lock, so none is
// running): what it left is undone first, in QEMU when it is still the
// recorded process, then on the host, and QEMU is read again.
func (a *attacher) checkID(ctx context.Context, store *state.Store, key string, q *qemuState) (*qemuState, error) {
	n, err := store.Load(key, a.p.ID)
	if err == nil && n.Status == state.StatusAttaching {
		other, err := lockRecordSocket(store, n, a.p.QMP)
		if err != nil {
			return nil, err
		}
		defer other.Unlock()
		if err := undoInterrupted(ctx, a.h, store, a.c, a.pid, q.Devices, n); err != nil {
			return nil, fmt.Errorf("an earlier attach of %s on this VM was interrupted, and undoing what it left failed (%w): its record stays; run netctl gc, then attach again", a.p.ID, err)
		}
		if q, err = readQEMU(ctx, a.c); err != nil {
			return nil, fmt.Errorf("read QEMU again: %w", err)
		}
	}
	return q, checkFree(store, key, a.p.ID, q)
}

// undoInterrupted undoes everything an attaching record names and
// removes it; c is a connection to the QEMU at the record's socket, whose
// pid is pid (the recorded QEMU only if it is the same process).
func undoInterrupted(ctx context.Context, h Host, store *state.Store, c *qmp.Client, pid int, devices map[string]bool, n *state.NIC) error {
	if c != nil && pid == n.QEMUPID && state.SameProcess(n.QEMUPID, n.QEMUStart) {
		if _, err := undoInterruptedQEMU(ctx, c, devices, n, false); err != nil {
			return err
		}
	}
	resolveIntent(h, n)
	vdpaInOtherRecord(store, n)
	if err := cleanupHost(ctx, h, n); err != nil {
		return err
	}
	return store.Remove(n.Key(), n.ID)
}

// vdpaInOtherRecord drops from an attaching record a vdpa device that
// another record names: the intent is written before the device is
// created, and a create that failed because the name was taken (another
// VM's NIC of the same id) must not make that device look like this
// attach's. It says so, or "".
func vdpaInOtherRecord(store *state.Store, n *state.NIC) string {
	if n.Status != state.StatusAttaching || n.VDPA == nil {
		return ""
	}
	all, _, err := store.List("")
	for _, o := range all {
		if o.VDPA != nil && o.VDPA.Name == n.VDPA.Name && (o.QMP != n.QMP || o.ID != n.ID || o.VM != n.VM) {
			name := n.VDPA.Name
			n.VDPA = nil
			return fmt.Sprintf("left vdpa device %s alone (NIC %s of %s uses it)", name, o.ID, vmLabel(o.VM, o.QMP))
		}
	}
	if err != nil {
		name := n.VDPA.Name
		n.VDPA = nil
		return fmt.Sprintf("left vdpa device %s alone (cannot tell whether another NIC uses it: %v)", name, err)
	}
	return ""
}

// lockRecordSocket takes the lock of the QMP socket a record names when
// it is not sock, whose lock the caller holds: records are keyed by the
// VM's name and locks by socket, so two monitors (two QEMUs with one
// -name, or one QEMU with two -qmp) share records. A record still
// attaching is an interrupted attach only if nobody holds its own
// socket's lock: when someone does (an attach or detach through that
// socket runs), the error says so. It never waits; nil when sock is the
// record's own socket (Unlock of nil is harmless).
func lockRecordSocket(store *state.Store, n *state.NIC, sock string) (*state.Lock, error) {
	if state.LockKey(n.QMP) == state.LockKey(sock) {
		return nil, nil
	}
	now, cancel := context.WithCancel(context.Background())
	cancel() // one try
	l, err := store.Lock(now, state.LockKey(n.QMP))
	if err != nil {
		return nil, fmt.Errorf("NIC %s of %s was recorded through QMP socket %s, and a netctl attach or detach through that socket holds its lock now: "+
			"run this again once it is done: %w", n.ID, vmLabel(n.VM, n.QMP), n.QMP, ErrConflict)
	}
	return l, nil
}
