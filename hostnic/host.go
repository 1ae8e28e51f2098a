package hostnic

import (
	"context"
	"net"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/vdpa"
)

// Host is everything netctl's faces do to the host side of a NIC,
// behind one interface so that unit tests can pass fakes. Real is this
// host. Unless a method says so, none leaves an fd open.
type Host interface {
	// Probe describes the host for policy.Decide (probe.ProbeFor with
	// what spec asks for); it gives up when ctx ends.
	Probe(ctx context.Context, spec ProbeSpec) (*host.Description, error)

	// OpenTap creates (spec.Create) or opens an existing tap with
	// vnet_hdr and spec.Queues queues; the OpenLink owns the queue fds.
	OpenTap(spec TapSpec) (OpenLink, error)
	// CreateTap creates persistent tap spec.Name (vnet_hdr, multiqueue
	// when spec.Queues > 1, owner unless NoOwner, MTU, alias TapAlias)
	// and returns its ifindex, holding no fd of it. It fails with
	// errs.ErrConflict, changing nothing, if a link called spec.Name
	// exists, also one another process creates at the same moment.
	CreateTap(spec PersistentTap) (ifindex int, err error)
	// MarkedTapIndex is the ifindex of the tap called name if it carries
	// netctl's mark (TapAlias, which CreateTap sets), else 0: a tap
	// someone else made is never taken for netctl's.
	MarkedTapIndex(name string) int
	// DeleteTap deletes tap name only while it carries netctl's mark and
	// has ifindex, and says whether it did; a tap that is gone, has
	// another ifindex or no mark is left alone (false) and is no error.
	DeleteTap(name string, ifindex int) (deleted bool, err error)

	// CreateMacvtap creates a macvtap on spec.Lower and opens its queues.
	CreateMacvtap(spec MacvtapSpec) (OpenLink, error)
	// FindMacvtap is the ifindex of the macvtap name on lower with
	// address mac (all three set when the kernel created it), else 0.
	FindMacvtap(name, lower string, mac net.HardwareAddr) int
	// DirectNotes reads lower device lower's features and says what a
	// guest on a macvtap over it loses (empty when nothing).
	DirectNotes(lower string) ([]string, error)

	// DeleteLink deletes the link name if it still has ifindex (0: any);
	// a link that is gone, or has another ifindex, is left alone and is
	// no error.
	DeleteLink(name string, ifindex int) error
	// LinkExists says whether the link name with ifindex (0: any) is
	// there.
	LinkExists(name string, ifindex int) bool

	// OpenVhostNet opens /dev/vhost-net; the caller owns the fd.
	OpenVhostNet() (int, error)

	// CreateVDPA adds vdpa device spec.Name from spec.Mgmtdev, binds it
	// to vhost_vdpa and waits until its /dev/vhost-vdpa-N exists,
	// returning that path. On failure it deletes the device again. A
	// device of that name that exists is refused (errs.ErrConflict and
	// unix.EEXIST), changing nothing.
	CreateVDPA(ctx context.Context, spec VDPASpec) (vhost string, err error)
	// DeleteVDPA deletes vdpa device name; a missing one is no error.
	DeleteVDPA(ctx context.Context, name string) error
	// VDPAExists says whether a vdpa device called name is there (or
	// cannot be told apart from one that is).
	VDPAExists(name string) bool
	// VDPAIdentity is vdpa device name's identity (the inode of
	// /sys/bus/vdpa/devices/NAME's directory, which a device deleted and
	// added again under the name does not keep); an error wrapping
	// os.ErrNotExist when there is no such device.
	VDPAIdentity(name string) (uint64, error)
	// VDPAMAC is the MAC in vdpa device name's config space (vdpa dev
	// config show), nil when it has none or all zeros. QEMU gives the
	// guest that MAC, not the -device mac= (virtio_net_get_config takes
	// a vhost-vdpa peer's own unless it is zero).
	VDPAMAC(ctx context.Context, name string) (net.HardwareAddr, error)
	// DescribeVDPA reads vdpa device name's bus driver and the features
	// the device offers (vdpa dev config show).
	DescribeVDPA(ctx context.Context, name string) (host.VDPADevice, error)
	// OpenVDPA opens the /dev/vhost-vdpa-N of a device bound to
	// vhost_vdpa; the caller owns the fd.
	OpenVDPA(ctx context.Context, name string) (fd int, path string, err error)
	// VDPAMapMode is how the device behind an fd OpenVDPA returned maps
	// guest memory (vdpa.MapVA: only shared file-backed memory).
	VDPAMapMode(fd int) vdpa.MapMode

	// CloseFD closes an fd that OpenVhostNet or OpenVDPA returned.
	CloseFD(fd int) error
}

// Real acts on this host (in the calling thread's network namespace).
type Real struct {
	// CacheDir is a state root (state.Open) where Probe keeps what holds
	// for one boot (the tap's offloads); "" probes everything each time.
	CacheDir string
}

var _ Host = Real{}

func (Real) CloseFD(fd int) error { return unix.Close(fd) }
