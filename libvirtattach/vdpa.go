package libvirtattach

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
)

// maxMgmtdev bounds --mgmtdev (a handle such as "vduse" or "pci/0000:65:00.2").
const maxMgmtdev = 64

// checkVDPARequest checks the vdpa part of r before anything is made:
// at most one of VDPA and Mgmtdev, names netctl may touch, and a backend
// that can use them.
func checkVDPARequest(r Request) error {
	if r.VDPA != "" && r.Mgmtdev != "" {
		return fmt.Errorf("give --vdpa DEV (a device bound to vhost_vdpa) or --mgmtdev MGMTDEV (netctl creates one), not both: %w", errs.ErrInvalid)
	}
	if r.VDPA != "" && !hostnic.ValidVDPAName(r.VDPA) {
		return fmt.Errorf("--vdpa %.32q: not a vdpa device name (netctl vdpa dev show lists them): %w", r.VDPA, errs.ErrInvalid)
	}
	if r.Mgmtdev != "" {
		if len(r.Mgmtdev) > maxMgmtdev {
			return fmt.Errorf("--mgmtdev of %d bytes: netctl vdpa mgmtdev show lists the management devices: %w", len(r.Mgmtdev), errs.ErrInvalid)
		}
		for i := 0; i < len(r.Mgmtdev); i++ {
			if c := r.Mgmtdev[i]; c <= ' ' || c >= 0x7f {
				return fmt.Errorf("--mgmtdev %.32q: netctl vdpa mgmtdev show lists the management devices: %w", r.Mgmtdev, errs.ErrInvalid)
			}
		}
	}
	if (r.VDPA != "" || r.Mgmtdev != "") && (r.Backend == policy.BackendVhostNet || r.Backend == policy.BackendUserspace) {
		return fmt.Errorf("--vdpa and --mgmtdev need --backend vdpa or auto: %w", errs.ErrInvalid)
	}
	return nil
}

// restrictVDPA lets the chain choose only the vdpa device the request
// names (name): without one, none (a device bound to vhost_vdpa may be
// another VM's).
func restrictVDPA(d *host.Description, name string) {
	if name == "" {
		if d.VDPA.Available {
			d.VDPA.Available = false
			d.VDPA.Error = "no --vdpa DEV or --mgmtdev MGMTDEV given (a device bound to vhost_vdpa may be another VM's): " +
				"netctl vdpa dev show lists the devices, netctl vdpa mgmtdev show the management devices"
		}
		d.VDPA.Devices = nil
		return
	}
	var keep []host.VDPADevice
	for _, v := range d.VDPA.Devices {
		if v.Name == name {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 && d.VDPA.Available {
		d.VDPA.Available = false
		d.VDPA.Error = "vdpa device " + name + " does not exist (netctl vdpa dev show)"
	}
	d.VDPA.Devices = keep
}

// createVDPA makes vdpa device netctl-ID on r.Mgmtdev for nic, recorded
// in nic.VDPA (saved by save) before it is made, and returns its
// /dev/vhost-vdpa-N and its undo (which deletes it only while it is the
// device made here). A device made whose identity cannot be read comes
// back with an error and its undo: the caller's rollback deletes it, and
// keeps the record when it cannot.
func createVDPA(ctx context.Context, r Request, h hostnic.Host, nic *state.NIC, mac net.HardwareAddr, save func() error) (string, func(context.Context) error, error) {
	name := hostnic.VDPAName(r.ID)
	if h.VDPAExists(name) {
		return "", nil, fmt.Errorf("a vdpa device called %s exists (vdpa dev show %s): netctl creates a device of its own with that name; "+
			"delete it (vdpa dev del %s) if it is no one's, or choose another --id: %w", name, name, name, errs.ErrConflict)
	}
	nic.VDPA = &state.VDPA{Name: name, Mgmtdev: r.Mgmtdev, Created: true}
	if err := save(); err != nil {
		nic.VDPA = nil
		return "", nil, fmt.Errorf("record the vdpa device to create: %w", err)
	}
	// MTU and max_vqp go to the device only when asked for, the MAC only
	// where the management device takes one (VDUSE does not: its
	// device's owner sets it; libvirt gives QEMU the guest's MAC).
	spec := hostnic.VDPASpec{Name: name, Mgmtdev: r.Mgmtdev, MTU: r.MTU, MAC: mac, MACOptional: true, Pin: r.Pool}
	if r.Queues > 1 {
		spec.MaxVQP = r.Queues
	}
	vhost, err := h.CreateVDPA(ctx, spec)
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			// Made by someone else since it was looked at: not netctl's.
			nic.VDPA = nil
			if serr := save(); serr != nil {
				err = fmt.Errorf("%w; and recording that no vdpa device was created failed: %w", err, serr)
			}
		}
		return "", nil, err
	}
	ino, ierr := h.VDPAIdentity(name)
	made := nic.VDPA
	undo := func(ctx context.Context) error { return deleteVDPA(ctx, h, made) }
	if ierr != nil {
		// The undo (the caller's rollback) deletes it by name; when that
		// fails too, the record that names it stays for detach.
		return "", undo, fmt.Errorf("vdpa %s: its identity: %w", name, ierr)
	}
	nic.VDPA.Vhost, nic.VDPA.Ino = vhost, ino
	if err := save(); err != nil {
		return "", nil, errors.Join(fmt.Errorf("record the vdpa device: %w", err), undo(ctx))
	}
	return vhost, undo, nil
}

// existingVDPA is hostnic.BoundVhostPath: the /dev/vhost-vdpa-N of an
// existing device bound to vhost_vdpa (libvirt opens that node).
var existingVDPA = hostnic.BoundVhostPath

// deleteVDPA is hostnic.DeleteRecordedVDPA, its answer dropped.
func deleteVDPA(ctx context.Context, h hostnic.Host, v *state.VDPA) error {
	_, err := hostnic.DeleteRecordedVDPA(ctx, h, v)
	return err
}
