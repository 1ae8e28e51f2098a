package hook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/zerocopy"
)

// Devices is what the hook does to the host; RealDevices does it to this
// host (in the calling thread's network namespace), a test passes a fake.
// No method leaves an fd open.
type Devices interface {
	// HookTapIndex is the ifindex of the tap called name if it carries
	// the hook's marker (TapAlias, which CreateTap sets), else 0: a tap
	// someone else made is never taken for the hook's.
	HookTapIndex(name string) int
	// CreateTap creates persistent tap it.Name (vnet_hdr, multiqueue
	// when it.Queues > 1, owner uid unless NoOwner, it.MTU, alias
	// TapAlias) and returns
	// its ifindex.
	// It fails with errs.ErrConflict, changing nothing, if a link called
	// it.Name exists, also one another process creates at the same moment.
	CreateTap(it Interface, owner int) (ifindex int, err error)
	// DeleteLink deletes link name if it still has ifindex; a link that
	// is gone, or has another ifindex, is left alone and is no error.
	DeleteLink(name string, ifindex int) error
	// CreateVDPA adds vdpa device it.Name from it.Mgmtdev, binds it to
	// vhost_vdpa and waits until its /dev/vhost-vdpa-N exists, returning
	// that path. On failure it deletes the device again.
	CreateVDPA(ctx context.Context, it Interface) (vhost string, err error)
	// DeleteVDPA deletes vdpa device name; a missing one is no error.
	DeleteVDPA(ctx context.Context, name string) error
	// VDPAIdentity is vdpa device name's identity (the inode of
	// /sys/bus/vdpa/devices/NAME's directory, which a device deleted and
	// added again under the name does not keep); an error wrapping
	// os.ErrNotExist when there is no such device.
	VDPAIdentity(name string) (uint64, error)
	// Probe describes this host for policy.Decide (vhost-net, the
	// offloads a tap takes, zero-copy, the installed QEMU's version; with
	// macvtap also a macvtap's offloads). It changes nothing on the host
	// and gives up when ctx ends.
	Probe(ctx context.Context, macvtap bool) (*host.Description, error)
	// DescribeVDPA reads vdpa device name's bus driver and the features
	// the device offers (vdpa dev config show).
	DescribeVDPA(ctx context.Context, name string) (host.VDPADevice, error)
	// DirectNotes reads direct interface it's lower device and says what
	// the guest loses on it (empty when nothing).
	DirectNotes(it Interface) ([]string, error)
}

// TapAlias is the alias (ip link set NAME alias ...) the hook gives each
// tap it creates: the mark by which a reconnect without a record tells
// the hook's taps from others'.
const TapAlias = "netctl hook tap"

// RealDevices acts on this host.
type RealDevices struct{}

var _ Devices = RealDevices{}

func (RealDevices) HookTapIndex(name string) int {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != "tuntap" || l.Attrs().Alias != TapAlias {
		return 0
	}
	return l.Attrs().Index
}

func (RealDevices) CreateTap(it Interface, owner int) (int, error) {
	if l, err := netlink.LinkByName(it.Name); err == nil {
		return 0, fmt.Errorf("tap %s: a %s link with that name exists (ifindex %d) and netctl did not create it: "+
			"pick another <target dev>, or delete it (ip link del %s): %w", it.Name, l.Type(), l.Attrs().Index, it.Name, errs.ErrConflict)
	}
	// The check above gives the clear line for a link that was there
	// before; Exclusive (IFF_TUN_EXCL) is what settles a race with another
	// domain's prepare making the same name now: the loser gets
	// ErrConflict and holds no fd of the winner's tap.
	var o *int
	if owner != NoOwner {
		o = &owner
	}
	// The alias is set before the tap is made persistent: a hook killed
	// at any moment leaves no persistent tap without it (which the next
	// prepare would refuse and no release would delete).
	t, err := macvtap.CreateTap(macvtap.TapConfig{Name: it.Name, VnetHdr: true, Queues: max(it.Queues, 1),
		MTU: it.MTU, Persistent: true, Owner: o, Exclusive: true, Alias: TapAlias})
	if err != nil {
		return 0, err
	}
	l, err := netlink.LinkByName(t.Name())
	if err != nil {
		t.Delete()
		return 0, fmt.Errorf("tap %s: created, then gone: %v: %w", it.Name, err, errs.ErrBusy)
	}
	ifindex := l.Attrs().Index
	if err := t.Close(); err != nil { // persistent: the tap stays for libvirt to open
		t.Delete()
		return 0, fmt.Errorf("tap %s: close: %w", it.Name, err)
	}
	return ifindex, nil
}

// Probe runs policy/probe.ProbeFor with the installed QEMU and, when
// asked, a scratch macvtap: the scratch devices are made in a throwaway
// network namespace. The probe has no context of its own (each of its
// parts is bounded: the vdpa family by 10 s, QEMU --version by 10 s), so
// it runs on its own goroutine and Probe stops waiting when ctx ends; the
// hook's process exits soon after and the goroutine with it.
func (RealDevices) Probe(ctx context.Context, withMacvtap bool) (*host.Description, error) {
	type result struct {
		d   *host.Description
		err error
	}
	ch := make(chan result, 1)
	go func() {
		d, err := probe.ProbeFor(probe.Parts{QEMU: true, Macvtap: withMacvtap})
		ch <- result{d, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("probing the host: %w", r.err)
		}
		return r.d, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("probing the host (vhost-net, tap offloads, vdpa, QEMU) did not finish within the hook's timeout: %w", ctx.Err())
	}
}

func (RealDevices) DescribeVDPA(ctx context.Context, name string) (host.VDPADevice, error) {
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

func (RealDevices) DeleteLink(name string, ifindex int) error {
	return macvtap.DeleteLinkIfSame(name, ifindex)
}

func (RealDevices) CreateVDPA(ctx context.Context, it Interface) (string, error) {
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
	for _, m := range mds {
		have = append(have, m.Handle())
		found = found || m.Handle() == it.Mgmtdev || m.Name == it.Mgmtdev
	}
	if !found {
		return "", fmt.Errorf("vdpa %s: no management device %q on this host (it has: %s; see vdpa mgmtdev show): "+
			"load its driver, or name another in netctl's metadata or the host config: %w",
			it.Name, it.Mgmtdev, strings.Join(append(have, "none")[:max(len(have), 1)], ", "), errs.ErrNotAvailable)
	}
	if _, err := c.Device(ctx, it.Name); err == nil {
		return "", fmt.Errorf("vdpa %s exists and netctl did not create it for this domain: "+
			"name another in <source dev>, or delete it (vdpa dev del %s): %w", it.Name, it.Name, errs.ErrConflict)
	}
	o := vdpa.AddOptions{Name: it.Name, MgmtDev: it.Mgmtdev, MAC: it.MAC, MTU: uint16(it.MTU), MaxVQP: uint16(it.Queues)}
	err = c.AddDevice(ctx, o)
	if errors.Is(err, errs.ErrNotSupported) && o.MAC != nil {
		// A management device that takes no MAC (VDUSE: its device's
		// owner sets it): create the device without; QEMU gives the guest
		// the XML's MAC. An MTU or queue count it cannot set stays an
		// error: the domain would not get what it asks.
		o.MAC = nil
		err = c.AddDevice(ctx, o)
	}
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			c.DeleteDevice(dctx, it.Name)
			cancel()
		}
	}()
	if drv, _ := vdpa.BoundDriver(it.Name); drv != vdpa.DriverVhostVDPA {
		if err := vdpa.Bind(it.Name, vdpa.DriverVhostVDPA); err != nil {
			return "", err
		}
	}
	p, err := waitVhostNode(ctx, it.Name)
	if err != nil {
		return "", err
	}
	ok = true
	return p, nil
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
			return "", fmt.Errorf("vdpa %s: no vhost-vdpa node before the hook's timeout: %w (%w)", name, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (RealDevices) DeleteVDPA(ctx context.Context, name string) error { return vdpa.Remove(ctx, name) }

func (RealDevices) VDPAIdentity(name string) (uint64, error) {
	if !vdpaNameOK(name) {
		return 0, fmt.Errorf("vdpa device name %.64q: %w", name, errs.ErrInvalid)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(vdpa.SysfsDevices, name), &st); err != nil {
		return 0, fmt.Errorf("vdpa %s: %w", name, &os.PathError{Op: "stat", Path: filepath.Join(vdpa.SysfsDevices, name), Err: err})
	}
	return st.Ino, nil
}

// wanted are the lower device's features whose absence the guest feels,
// and what it loses.
var wanted = []struct{ feature, loss string }{
	{"tx-checksum-ip-generic", "checksum offload (the host checksums every frame)"},
	{"tx-scatter-gather", "scatter-gather (every frame is linearised)"},
	{"tx-tcp-segmentation", "TSO (large TCP sends are segmented in software)"},
	{"tx-generic-segmentation", "GSO"},
	{"rx-gro", "GRO on receive"},
}

func (RealDevices) DirectNotes(it Interface) ([]string, error) {
	f, err := macvtap.ReadFeatures(it.Name)
	if err != nil {
		return nil, fmt.Errorf("direct interface on %s: %w: name an existing lower device in <source dev>", it.Name, err)
	}
	var notes []string
	for _, w := range wanted {
		if on, known := f.Active[w.feature]; known && !on {
			notes = append(notes, fmt.Sprintf("direct on %s: %s is off, so the guest loses %s", it.Name, w.feature, w.loss))
		}
	}
	if e := zerocopy.Check(macvtap.KindMacvtap, f); !e.Eligible {
		notes = append(notes, fmt.Sprintf("direct on %s: no zero-copy TX: %s", it.Name, e.Reason))
	}
	return notes, nil
}
