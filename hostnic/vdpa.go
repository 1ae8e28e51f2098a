package hostnic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

// VDPASpec says what vdpa device CreateVDPA makes. MAC, MTU and MaxVQP
// go to the device only when set: a management device may refuse config
// attributes (VDUSE does).
type VDPASpec struct {
	Name    string
	Mgmtdev string // a management device's handle (bus/name) or name
	MAC     net.HardwareAddr
	MTU     int
	MaxVQP  int
	// MACOptional: a management device that takes no MAC (VDUSE: its
	// device's owner sets it) gets the device without one, for the
	// guest's MAC is set elsewhere (libvirt's XML gives it to QEMU). An
	// MTU or queue count it cannot set stays an error.
	MACOptional bool
	// Pin, when set, is a pool's plan (policy.Pool): a management device
	// that says which features it supports gets the device with
	// device_features provisioned without the managed bits the plan
	// leaves out (Provisioned), so that it cannot offer them; one that does
	// not say, or refuses the attribute (VDUSE), makes the device as it is
	// (QEMU's properties, from the same plan, keep the guest from them).
	Pin *policy.Pool
}

// Provisioned is device_features for a device of management device m
// pinned to pool: m's supported features without the managed bits pool
// leaves out; 0 (none: the device as the driver makes it) without a pool,
// when m does not say what it supports, or when nothing would change.
func Provisioned(m vdpa.MgmtDev, pool *policy.Pool) virtio.Features {
	if pool == nil || !m.HasDevFeatures || m.DevFeatures == 0 {
		return 0
	}
	f := m.DevFeatures &^ pool.Outside(m.DevFeatures)
	if f == m.DevFeatures {
		return 0
	}
	return f
}

// vdpaUndoTimeout bounds deleting a device a failed CreateVDPA added;
// not on the caller's ctx, which may be what ended (a Ctrl-C).
const vdpaUndoTimeout = 15 * time.Second

// vhostNodeWait bounds the wait for /dev/vhost-vdpa-N when ctx has no
// earlier deadline.
const vhostNodeWait = 10 * time.Second

// CreateVDPA is like `vdpa dev add name NAME mgmtdev MGMTDEV ...`, then
// binding it to vhost_vdpa and waiting for its node. Needs the vdpa
// generic netlink family (Linux 5.9+ with a management device's driver).
func (Real) CreateVDPA(ctx context.Context, spec VDPASpec) (string, error) {
	c, err := vdpa.Dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	mds, err := c.MgmtDevs(ctx)
	if err != nil {
		return "", err
	}
	var have []string
	found := false
	var md vdpa.MgmtDev
	for _, m := range mds {
		have = append(have, m.Handle())
		if m.Handle() == spec.Mgmtdev || m.Name == spec.Mgmtdev {
			found, md = true, m
		}
	}
	if !found {
		return "", fmt.Errorf("vdpa %s: no management device %q on this host (it has: %s; see vdpa mgmtdev show): "+
			"load its driver, or name another: %w",
			spec.Name, spec.Mgmtdev, strings.Join(append(have, "none")[:max(len(have), 1)], ", "), errs.ErrNotAvailable)
	}
	if _, err := c.Device(ctx, spec.Name); err == nil {
		return "", fmt.Errorf("vdpa %s exists and netctl did not create it for this NIC: "+
			"name another, or delete it (vdpa dev del %s): %w (%w)", spec.Name, spec.Name, errs.ErrConflict, unix.EEXIST)
	}
	o := vdpa.AddOptions{Name: spec.Name, MgmtDev: spec.Mgmtdev, MAC: spec.MAC, MTU: uint16(spec.MTU), MaxVQP: uint16(spec.MaxVQP),
		Features: Provisioned(md, spec.Pin)}
	err = c.AddDevice(ctx, o)
	if errors.Is(err, errs.ErrNotSupported) && o.Features != 0 {
		o.Features = 0 // optional: the plan's QEMU properties pin the guest all the same
		err = c.AddDevice(ctx, o)
	}
	if errors.Is(err, errs.ErrNotSupported) && o.MAC != nil && spec.MACOptional {
		o.MAC = nil
		err = c.AddDevice(ctx, o)
	}
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), vdpaUndoTimeout)
			c.DeleteDevice(dctx, spec.Name)
			cancel()
		}
	}()
	if err := bindVhostVDPA(spec.Name); err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, vhostNodeWait)
	defer cancel()
	p, err := waitNode(wctx, spec.Name)
	if err != nil {
		return "", err
	}
	ok = true
	return p, nil
}

// The steps of CreateVDPA after the device is added, as variables so
// that a test fails each and sees the device deleted again.
var (
	bindVhostVDPA = bindVhost
	waitNode      = waitVhostNode
)

// bindVhost binds device name to vhost_vdpa unless it is bound to it.
func bindVhost(name string) error {
	if drv, _ := vdpa.BoundDriver(name); drv != vdpa.DriverVhostVDPA {
		return vdpa.Bind(name, vdpa.DriverVhostVDPA)
	}
	return nil
}

// waitVhostNode waits until the device's /dev/vhost-vdpa-N is there (the
// kernel's devtmpfs makes it, possibly after the sysfs entry).
func waitVhostNode(ctx context.Context, name string) (string, error) {
	for {
		p, err := vdpa.VhostVDPAPath(name)
		if err == nil {
			var st unix.Stat_t
			if err = unix.Stat(p, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
				return p, nil
			}
			if err == nil {
				err = fmt.Errorf("%s is not a character device", p)
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("vdpa %s: no vhost-vdpa node in time: %w (%w)", name, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeleteVDPA is like `vdpa dev del NAME` (vdpa.Remove).
func (Real) DeleteVDPA(ctx context.Context, name string) error { return vdpa.Remove(ctx, name) }

func (Real) VDPAExists(name string) bool {
	_, err := os.Lstat(filepath.Join(vdpa.SysfsDevices, name))
	return !errors.Is(err, os.ErrNotExist)
}

func (Real) VDPAIdentity(name string) (uint64, error) {
	if !ValidVDPAName(name) {
		return 0, fmt.Errorf("vdpa device name %.64q: %w", name, errs.ErrInvalid)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(vdpa.SysfsDevices, name), &st); err != nil {
		return 0, fmt.Errorf("vdpa %s: %w", name, &os.PathError{Op: "stat", Path: filepath.Join(vdpa.SysfsDevices, name), Err: err})
	}
	return st.Ino, nil
}

func (Real) DescribeVDPA(ctx context.Context, name string) (host.VDPADevice, error) {
	d := host.VDPADevice{Name: name}
	drv, err := vdpa.BoundDriver(name)
	if err != nil {
		return d, err
	}
	d.Driver = drv
	c, err := vdpa.Dial(ctx)
	if err != nil {
		return d, err
	}
	defer c.Close()
	cfg, err := c.Config(ctx, name)
	if err != nil {
		return d, err
	}
	d.Features, d.FeaturesHex = cfg.Features.Names(), fmt.Sprintf("%#x", uint64(cfg.Features))
	return d, nil
}

func (Real) VDPAMAC(ctx context.Context, name string) (net.HardwareAddr, error) {
	c, err := vdpa.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cfg, err := c.Config(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(cfg.MAC) != 6 || bytes.Equal(cfg.MAC, make([]byte, 6)) {
		return nil, nil
	}
	return cfg.MAC, nil
}

func (Real) OpenVDPA(ctx context.Context, name string) (int, string, error) {
	p, err := vdpa.VhostVDPAPath(name)
	if err != nil {
		return -1, "", err
	}
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return -1, p, fmt.Errorf("vdpa %s: %s is open elsewhere (vhost-vdpa allows one open; a VM may use it): %w: %w", name, p, errs.ErrBusy, err)
		}
		return -1, p, fmt.Errorf("vdpa %s: open %s: %w", name, p, err)
	}
	return fd, p, nil
}

func (Real) VDPAMapMode(fd int) vdpa.MapMode { return vdpa.MapModeOfFD(fd) }

// BoundVhostPath is the /dev/vhost-vdpa-N of existing vdpa device name,
// which must be bound to vhost_vdpa (a face that hands the node to
// another program, such as libvirt, opens nothing itself).
func BoundVhostPath(name string) (string, error) {
	if drv, err := vdpa.BoundDriver(name); err != nil {
		return "", fmt.Errorf("vdpa %s: %w (netctl vdpa dev show lists the devices)", name, err)
	} else if drv != vdpa.DriverVhostVDPA {
		return "", fmt.Errorf("vdpa %s is bound to %q, not vhost_vdpa: bind it (netctl vdpa dev bind %s) or create one with --mgmtdev: %w",
			name, drv, name, errs.ErrNotAvailable)
	}
	return vdpa.VhostVDPAPath(name)
}
