package hostnic

import (
	"cmp"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
)

// OpenLink is an open tap or macvtap and its queue fds.
type OpenLink interface {
	Name() string
	Ifindex() int
	Queues() int
	// QueueFD lends queue i's fd (the OpenLink keeps it).
	QueueFD(i int) int
	// Release closes the fds and keeps the link (QEMU holds its own
	// copies of the queues).
	Release() error
	// Destroy closes the fds and deletes the link if this OpenLink
	// created it.
	Destroy() error
}

// TapSpec says which tap OpenTap creates or opens.
type TapSpec struct {
	Name   string // an existing tap (Create false) or a template (TapTemplate)
	Create bool
	Queues int
	MTU    int              // 0: leave it
	MAC    net.HardwareAddr // the tap's own address (not the guest's); nil: leave it
	// Shared lets an existing tap have queues another process holds;
	// otherwise such a tap is refused (errs.ErrBusy) and left as it was.
	Shared bool
}

type tapLink struct {
	t       *macvtap.Tap
	ifindex int
}

func (b *tapLink) Name() string      { return b.t.Name() }
func (b *tapLink) Ifindex() int      { return b.ifindex }
func (b *tapLink) Queues() int       { return b.t.Queues() }
func (b *tapLink) QueueFD(i int) int { return b.t.QueueFD(i) }
func (b *tapLink) Release() error    { return b.t.Close() }

// Destroy closes the queues: a tap OpenTap created is not persistent, so
// it goes away with the last fd (QEMU's included).
func (b *tapLink) Destroy() error { return b.t.Close() }

// OpenTap is like `ip tuntap add mode tap multi_queue vnet_hdr` (Create)
// and opening its queues; any step that fails closes what it opened.
func (Real) OpenTap(spec TapSpec) (OpenLink, error) {
	if !spec.Create {
		l, err := netlink.LinkByName(spec.Name)
		if err != nil {
			return nil, fmt.Errorf("tap %s: %w: name an existing tap (ip -d link show type tun), or leave --tap out and netctl creates one: %w", spec.Name, err, errs.ErrInvalid)
		}
		if _, ok := l.(*netlink.Tuntap); !ok {
			return nil, fmt.Errorf("tap %s is a %s link, not a tap: %w", spec.Name, l.Type(), errs.ErrInvalid)
		}
	}
	t, err := macvtap.CreateTap(macvtap.TapConfig{Name: spec.Name, VnetHdr: true, Queues: spec.Queues, MTU: spec.MTU,
		OwnQueues: !spec.Create && !spec.Shared})
	if err != nil {
		return nil, err
	}
	b := &tapLink{t: t}
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

// TapAlias is the alias (ip link set NAME alias ...) CreateTap gives each
// persistent tap: the mark by which netctl tells its taps from others'
// when it has no record (a libvirtd restart) and before it deletes one.
// Taps on running hosts carry this text: it never changes.
const TapAlias = "netctl hook tap"

// NoOwner is PersistentTap.Owner when the tap gets no owner (TUNSETOWNER
// is not set): only root (CAP_NET_ADMIN) can then attach queues to it.
const NoOwner = -1

// PersistentTap says what tap CreateTap makes.
type PersistentTap struct {
	Name   string
	Queues int // < 1 is 1
	MTU    int // 0: the kernel's default
	Owner  int // a uid, or NoOwner
	// Alias is the tap's mark: "" is TapAlias (the hook's; MarkedTapIndex
	// and DeleteTap find only those), CNITapAlias the CNI plugin's.
	Alias string
}

func (Real) CreateTap(spec PersistentTap) (int, error) {
	if l, err := netlink.LinkByName(spec.Name); err == nil {
		return 0, fmt.Errorf("tap %s: a %s link with that name exists (ifindex %d) and netctl did not create it: "+
			"pick another <target dev>, or delete it (ip link del %s): %w", spec.Name, l.Type(), l.Attrs().Index, spec.Name, errs.ErrConflict)
	}
	// The check above gives the clear line for a link that was there
	// before; Exclusive (IFF_TUN_EXCL) is what settles a race with another
	// caller making the same name now: the loser gets ErrConflict and
	// holds no fd of the winner's tap.
	var o *int
	if spec.Owner != NoOwner {
		o = &spec.Owner
	}
	// The alias is set before the tap is made persistent: a process
	// killed at any moment leaves no persistent tap without it (which
	// MarkedTapIndex would not find and DeleteTap would not delete).
	t, err := macvtap.CreateTap(macvtap.TapConfig{Name: spec.Name, VnetHdr: true, Queues: max(spec.Queues, 1),
		MTU: spec.MTU, Persistent: true, Owner: o, Exclusive: true, Alias: cmp.Or(spec.Alias, TapAlias)})
	if err != nil {
		return 0, err
	}
	l, err := netlink.LinkByName(t.Name())
	if err != nil {
		t.Delete()
		return 0, fmt.Errorf("tap %s: created, then gone: %v: %w", spec.Name, err, errs.ErrBusy)
	}
	ifindex := l.Attrs().Index
	if err := t.Close(); err != nil { // persistent: the tap stays for its user to open
		t.Delete()
		return 0, fmt.Errorf("tap %s: close: %w", spec.Name, err)
	}
	return ifindex, nil
}

func (Real) MarkedTapIndex(name string) int {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != "tuntap" || l.Attrs().Alias != TapAlias {
		return 0
	}
	return l.Attrs().Index
}

func (r Real) DeleteTap(name string, ifindex int) (bool, error) {
	if ifindex <= 0 || r.MarkedTapIndex(name) != ifindex {
		return false, nil // gone, another link of that name, or not marked netctl's
	}
	if err := macvtap.DeleteLinkIfSame(name, ifindex); err != nil {
		return false, err
	}
	return true, nil
}
