package attach

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

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/vhostnet"
)

// Host is everything attach does to this host, behind one interface so
// that unit tests can use fakes. The real one is RealHost.
type Host interface {
	// Probe describes the host for policy.Decide (probe.Probe).
	Probe(ctx context.Context) (*host.Description, error)
	// OpenTap creates (Create) or opens an existing tap with vnet_hdr and
	// the given queues; the Backend owns the queue fds.
	OpenTap(spec TapSpec) (Backend, error)
	// CreateMacvtap creates a macvtap on spec.Lower and opens its queues.
	CreateMacvtap(spec MacvtapSpec) (Backend, error)
	// OpenVhostNet opens /dev/vhost-net; the caller owns the fd.
	OpenVhostNet() (int, error)
	// CreateVDPA adds a vdpa device and binds it to vhost_vdpa
	// (vdpa dev add ...); DeleteVDPA removes it.
	CreateVDPA(ctx context.Context, spec VDPASpec) error
	DeleteVDPA(ctx context.Context, name string) error
	// VDPAExists says whether a vdpa device called name is there (or
	// cannot be told apart from one that is).
	VDPAExists(name string) bool
	// OpenVDPA opens the /dev/vhost-vdpa-N of a device bound to
	// vhost_vdpa; the caller owns the fd.
	OpenVDPA(ctx context.Context, name string) (fd int, path string, err error)
	// VDPAMapMode is how the device behind an fd OpenVDPA returned maps
	// guest memory (vdpa.MapVA: only shared file-backed memory).
	VDPAMapMode(fd int) vdpa.MapMode
	// DeleteLink deletes the link name if it still has ifindex (0: any);
	// a link that is gone is not an error.
	DeleteLink(name string, ifindex int) error
	// LinkExists says whether the link name with ifindex is there.
	LinkExists(name string, ifindex int) bool
	// FindMacvtap is the ifindex of the macvtap name on lower with
	// address mac (all three set when the kernel created it), else 0:
	// how a record written before the macvtap existed tells it apart.
	FindMacvtap(name, lower string, mac net.HardwareAddr) int
	// CloseFD closes an fd that OpenVhostNet or OpenVDPA returned.
	CloseFD(fd int) error
}

// Backend is an open tap or macvtap.
type Backend interface {
	Name() string
	Ifindex() int
	Queues() int
	// QueueFD lends queue i's fd (the Backend keeps it).
	QueueFD(i int) int
	// Release closes the Backend's fds and keeps the link (QEMU holds its
	// own copies of the queues).
	Release() error
	// Destroy closes the fds and deletes the link if this Backend created
	// it.
	Destroy() error
}

// TapSpec says which tap to create or open.
type TapSpec struct {
	Name   string // an existing tap (Create false) or a template ("nctl%d")
	Create bool
	Queues int
	MTU    int              // 0: leave it
	MAC    net.HardwareAddr // the tap's own address (not the guest's); nil: leave it
	// Shared lets an existing tap have queues another process holds;
	// otherwise such a tap is refused (ErrBusy) and left as it was.
	Shared bool
}

// MacvtapSpec says what macvtap to create.
type MacvtapSpec struct {
	Name   string // the macvtap's name; "" lets netctl pick nctlmvN
	Lower  string
	Mode   macvtap.Mode
	Queues int
	MTU    int
	MAC    net.HardwareAddr // the guest's MAC: macvtap delivers frames for it
}

// VDPASpec says what vdpa device to create.
type VDPASpec struct {
	Name    string
	Mgmtdev string
	MAC     net.HardwareAddr
	MTU     int
	MaxVQP  int
}

// RealHost is this host: probe.Probe, macvtap, vhostnet and vdpa.
type RealHost struct {
	// CacheDir is a state root (state.Open) where Probe keeps what holds
	// for one boot (the tap's offloads); "" probes everything each time.
	CacheDir string
}

var _ Host = RealHost{}

// Probe reads what policy.Decide chooses by and nothing else: no scratch
// macvtap (Decide counts on the tap's offloads) and no run of the
// installed QEMU (attach asks the running one, query-version). Together
// they were 70 of the 93 ms an attach took on this host (make bench). The
// tap's offloads depend only on the running kernel: with a CacheDir they
// are probed on a scratch tap once per boot and kept there (the scratch
// tap was most of what was left: 15-45 ms).
func (h RealHost) Probe(ctx context.Context) (*host.Description, error) {
	var parts probe.Parts
	var store *state.Store
	if h.CacheDir != "" {
		if s, err := state.Open(h.CacheDir); err == nil {
			store = s
			var t host.Tap
			if ok, _ := s.LoadBootCache(tapCacheName, &t); ok && validTap(t) {
				parts.Tap = &t
			}
		}
	}
	d, err := probe.ProbeFor(parts)
	if err == nil && store != nil && parts.Tap == nil && validTap(d.Tap) {
		store.SaveBootCache(tapCacheName, d.Tap) // best effort: the next attach probes again
	}
	return d, err
}

// tapCacheName is the boot cache entry of the tap's offloads.
const tapCacheName = "tap-offloads"

// validTap: a tap section worth keeping or using: available, with no
// error, and offload names netctl knows.
func validTap(t host.Tap) bool {
	if !t.Available || t.Error != "" || len(t.Offloads) > 16 {
		return false
	}
	_, err := macvtap.ParseOffloads(strings.Join(t.Offloads, " "))
	return err == nil
}

type tapBackend struct {
	t       *macvtap.Tap
	ifindex int
	created bool
}

func (b *tapBackend) Name() string      { return b.t.Name() }
func (b *tapBackend) Ifindex() int      { return b.ifindex }
func (b *tapBackend) Queues() int       { return b.t.Queues() }
func (b *tapBackend) QueueFD(i int) int { return b.t.QueueFD(i) }
func (b *tapBackend) Release() error    { return b.t.Close() }

// Destroy closes the queues: a tap netctl created is not persistent, so
// it goes away with the last fd (QEMU's included).
func (b *tapBackend) Destroy() error { return b.t.Close() }

func (RealHost) OpenTap(spec TapSpec) (Backend, error) {
	if !spec.Create {
		l, err := netlink.LinkByName(spec.Name)
		if err != nil {
			return nil, fmt.Errorf("tap %s: %w: name an existing tap (ip -d link show type tun), or leave --tap out and netctl creates one: %w", spec.Name, err, ErrInvalid)
		}
		if _, ok := l.(*netlink.Tuntap); !ok {
			return nil, fmt.Errorf("tap %s is a %s link, not a tap: %w", spec.Name, l.Type(), ErrInvalid)
		}
	}
	t, err := macvtap.CreateTap(macvtap.TapConfig{Name: spec.Name, VnetHdr: true, Queues: spec.Queues, MTU: spec.MTU,
		OwnQueues: !spec.Create && !spec.Shared})
	if err != nil {
		return nil, err
	}
	b := &tapBackend{t: t, created: spec.Create}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	l, err := netlink.LinkByName(t.Name())
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", t.Name(), err)
	}
	b.ifindex = l.Attrs().Index
	if spec.Create && spec.MAC != nil {
		if err := t.SetMAC(spec.MAC); err != nil {
			return nil, err
		}
	}
	if err := t.Up(); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

type macvtapBackend struct{ m *macvtap.Macvtap }

func (b *macvtapBackend) Name() string      { return b.m.Name() }
func (b *macvtapBackend) Ifindex() int      { return b.m.Ifindex() }
func (b *macvtapBackend) Queues() int       { return b.m.Queues() }
func (b *macvtapBackend) QueueFD(i int) int { return b.m.QueueFD(i) }
func (b *macvtapBackend) Release() error    { return b.m.CloseQueues() }
func (b *macvtapBackend) Destroy() error    { return b.m.Close() }

func (RealHost) CreateMacvtap(spec MacvtapSpec) (Backend, error) {
	name := spec.Name
	if name == "" {
		name = "nctlmv%d"
	}
	m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: name, Lower: spec.Lower, Mode: spec.Mode,
		MAC: spec.MAC, Queues: spec.Queues, MTU: spec.MTU})
	if err != nil {
		return nil, err
	}
	return &macvtapBackend{m: m}, nil
}

func (RealHost) OpenVhostNet() (int, error) {
	d, err := vhostnet.Open() // its error says what to do when the device is missing
	if err != nil {
		return -1, err
	}
	defer d.Close()
	fd, err := unix.FcntlInt(uintptr(d.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("vhost-net: dup: %w", err)
	}
	return fd, nil
}

func (RealHost) CreateVDPA(ctx context.Context, spec VDPASpec) error {
	c, err := vdpa.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	o := vdpa.AddOptions{Name: spec.Name, MgmtDev: spec.Mgmtdev, MAC: spec.MAC, MTU: uint16(spec.MTU), MaxVQP: uint16(spec.MaxVQP)}
	if err := c.AddDevice(ctx, o); err != nil {
		return err
	}
	if drv, _ := vdpa.BoundDriver(spec.Name); drv != vdpa.DriverVhostVDPA {
		if err := vdpa.Bind(spec.Name, vdpa.DriverVhostVDPA); err != nil {
			// Not on ctx: an interrupted attach (Ctrl-C cancels ctx) must
			// still delete the device it just added.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			c.DeleteDevice(dctx, spec.Name)
			return err
		}
	}
	return nil
}

func (RealHost) DeleteVDPA(ctx context.Context, name string) error { return vdpa.Remove(ctx, name) }

func (RealHost) VDPAExists(name string) bool {
	_, err := os.Lstat(filepath.Join(vdpa.SysfsDevices, name))
	return !errors.Is(err, os.ErrNotExist)
}

func (RealHost) OpenVDPA(ctx context.Context, name string) (int, string, error) {
	p, err := vdpa.VhostVDPAPath(name)
	if err != nil {
		return -1, "", err
	}
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return -1, p, fmt.Errorf("vdpa %s: %s is open elsewhere (vhost-vdpa allows one open; a VM may use it): %w: %w", name, p, ErrBusy, err)
		}
		return -1, p, fmt.Errorf("vdpa %s: open %s: %w", name, p, err)
	}
	return fd, p, nil
}

func (RealHost) VDPAMapMode(fd int) vdpa.MapMode { return vdpa.MapModeOfFD(fd) }

func (RealHost) DeleteLink(name string, ifindex int) error {
	return macvtap.DeleteLinkIfSame(name, ifindex)
}

func (RealHost) LinkExists(name string, ifindex int) bool {
	l, err := netlink.LinkByName(name)
	return err == nil && (ifindex == 0 || l.Attrs().Index == ifindex)
}

func (RealHost) FindMacvtap(name, lower string, mac net.HardwareAddr) int {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != "macvtap" || !bytes.Equal(l.Attrs().HardwareAddr, mac) {
		return 0
	}
	lo, err := netlink.LinkByName(lower)
	if err != nil || lo.Attrs().Index != l.Attrs().ParentIndex {
		return 0
	}
	return l.Attrs().Index
}

func (RealHost) CloseFD(fd int) error { return unix.Close(fd) }
