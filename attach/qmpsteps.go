package attach

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// addNetdev passes fds with getfd on the one connection and adds the
// netdev (netdevArgs), then checks QEMU really has it.
func (a *attacher) addNetdev(ctx context.Context, fds []passFD, netdevArgs map[string]any, nic *state.NIC) error {
	netdev := nic.Netdev
	// Pass the fds on this one connection; until netdev_add consumes a
	// name, its undo is closefd. Each undo is pushed before its command:
	// QEMU may have done a command whose answer was lost (the connection
	// broke), and an undo of something that is not there is a no-op.
	consumed := false
	for _, f := range fds {
		name := f.name
		a.undo.push("closefd "+name, func(ctx context.Context) error {
			if consumed {
				return nil
			}
			return a.qmpUndo(ctx, "closefd", map[string]any{"fdname": name}, "GenericError")
		})
		if err := a.c.SendFD(ctx, f.name, f.fd); err != nil {
			return step("pass fd "+f.name+" (getfd)", err)
		}
	}
	netdevRefused := false // QEMU answered netdev_add with an error: the id is not ours to delete
	a.undo.push("netdev_del "+netdev, func(ctx context.Context) error {
		if netdevRefused {
			return nil
		}
		return a.qmpUndo(ctx, "netdev_del", map[string]any{"id": netdev}, "DeviceNotFound")
	})
	// A netdev whose vhost setup failed can be deleted with only a
	// warning: check it is really there, with info network sent behind
	// netdev_add (QEMU runs them in order: one round trip).
	var out string
	errs := a.c.Batch(ctx, []qmp.Cmd{
		{Name: "netdev_add", Args: netdevArgs},
		{Name: "human-monitor-command", Args: map[string]string{"command-line": "info network"}, Out: &out},
	})
	if err := errs[0]; err != nil {
		netdevRefused = isQEMUError(err)
		return step("netdev_add "+netdev, netdevHint(err))
	}
	consumed = true
	if err := errs[1]; err != nil {
		return step("check the netdev", fmt.Errorf("info network: %w", err))
	}
	if _, err := diagnose.ParseInfoNetwork(out, netdev); err != nil {
		return step("check the netdev", fmt.Errorf("netdev_add %s answered but QEMU has no such netdev (a vhost failure QEMU only warned about?): %w", netdev, err))
	}

	return nil
}

// addDevice records the NIC, then adds virtio-net-pci with the
// decision's properties: device_add is the last step, so nothing after it
// can fail.
func (a *attacher) addDevice(ctx context.Context, dec policy.Decision, nic *state.NIC, store *state.Store) error {
	p := a.p
	netdev := nic.Netdev
	dev := map[string]any{"driver": "virtio-net-pci", "id": p.ID, "netdev": netdev, "mac": nic.MAC}
	props := maps.Clone(dec.QEMU)
	if p.Queues > 1 {
		props["mq"] = "on"
		props["vectors"] = fmt.Sprint(2*p.Queues + 2)
	}
	if p.MTU != 0 {
		// The guest learns the backend's MTU (VIRTIO_NET_F_MTU), as
		// libvirt does for <mtu size=N/>.
		props["host_mtu"] = fmt.Sprint(p.MTU)
	}
	for _, k := range sortedKeys(props) {
		dev[k] = qmpValue(props[k])
		nic.Properties[k] = props[k]
	}
	if a.bus != "" {
		dev["bus"] = a.bus
		nic.Properties["bus"] = a.bus
	}
	if p.Addr != "" {
		dev["addr"] = p.Addr
		nic.Properties["addr"] = p.Addr
	}
	for k, v := range p.ExtraProps {
		dev[k] = v
	}
	// The record says attached before device_add, so that device_add is
	// the last step and nothing after it can fail. (Its removal is the
	// intent record's undo, the last one.)
	nic.Status = state.StatusAttached
	if err := store.Save(nic); err != nil {
		return step("record the NIC", err)
	}
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
		if err == nil && !ids[p.ID] {
			return nil
		}
		if err == nil {
			err = unplug(ctx, a.c, p.ID, undoUnplugWait, 5*time.Second)
		}
		if err == nil {
			return nil
		}
		// The device may still be in the VM, on its netdev, tap and fds:
		// the undos below it would delete its backend under it and
		// forget it. Keep all of it, recorded, for netctl detach.
		nic.Status, nic.Note = state.StatusDetachTimeout, "attach failed and its rollback could not remove the device: "+err.Error()
		if serr := store.Save(nic); serr != nil {
			return fmt.Errorf("%w: %w; and recording it failed (%w): the device may still be in the VM, netctl has no record of it; remove it with device_del id=%s, then netdev_del id=%s",
				errKeepRest, err, serr, p.ID, netdev)
		}
		return fmt.Errorf("%w: %w: NIC %s may still be in the VM and stays recorded (netctl list): run netctl detach --id %s to finish",
			errKeepRest, err, p.ID, p.ID)
	})
	if err := a.c.Run(ctx, "device_add", dev, nil); err != nil {
		return step("device_add virtio-net-pci id="+p.ID, err)
	}
	return nil
}

// undoUnplugWait is how long the undo of device_add waits for the guest
// to release the device.
var undoUnplugWait = 10 * time.Second

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
		return &inUseError{fmt.Sprintf("%v: pick another --id", err)}
	case strings.Contains(err.Error(), "vhost"):
		return fmt.Errorf("%w (QEMU could not start vhost on the fds netctl passed; try --backend userspace)", err)
	}
	return err
}

// inUseError is an id in use: it is ErrConflict (errors.Is), but its
// message says only what is in use and what to do.
type inUseError struct{ msg string }

func (e *inUseError) Error() string { return e.msg }
func (e *inUseError) Unwrap() error { return ErrConflict }

func inUse(format string, a ...any) error { return &inUseError{fmt.Sprintf(format, a...)} }
