package macvtap

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// TunPath is the tun/tap clone device (misc 10:200).
const TunPath = "/dev/net/tun"

// TapConfig says what tap to create or open.
type TapConfig struct {
	// Name of the interface, or a template with %d ("vm%d"); empty means
	// the kernel's default "tap%d".
	Name string
	// VnetHdr puts a virtio_net_hdr before every frame (IFF_VNET_HDR);
	// vhost-net needs it unless vhost itself adds the header.
	VnetHdr bool
	// VnetHdrSize is the header size: 10 (legacy), 12 (VERSION_1 or
	// MRG_RXBUF) or 20 (with hash report). Zero keeps the kernel's 10.
	VnetHdrSize int
	// Queues is the number of queues to open, 1 to 256 (IFF_MULTI_QUEUE
	// when more than one; tun's MAX_TAP_QUEUES is 256). Zero means one.
	Queues int
	// MTU of the tap, 68 to 65521 (tun's 65535 less the Ethernet
	// header); 0 keeps the kernel's 1500 (or an existing tap's MTU).
	MTU int
	// Persistent keeps the tap when its last fd closes (TUNSETPERSIST);
	// remove it with Delete.
	Persistent bool
	// Owner and Group, when set, let that user or group open the
	// persistent tap without CAP_NET_ADMIN (TUNSETOWNER, TUNSETGROUP).
	Owner, Group *int
	// VnetLE makes the virtio-net header little-endian for a legacy
	// (pre-VERSION_1) big-endian guest (TUNSETVNETLE).
	VnetLE bool
	// SndBuf sets the send buffer (TUNSETSNDBUF); 0 keeps the kernel's
	// INT_MAX, which vhost-net's batched transmit path needs.
	SndBuf int
	// TunDevice is the clone device to open (default /dev/net/tun), for a
	// process that has its own node (a jailed VMM, a test).
	TunDevice string
	// Exclusive creates a new tap and never attaches to an existing one:
	// queue 0 is opened with IFF_TUN_EXCL, so the kernel (tun_set_iff)
	// refuses with EBUSY if an interface called Name exists, and CreateTap
	// returns ErrConflict. Two processes racing to create the same name
	// thus get one winner; the loser holds no fd of the winner's tap (and
	// so can never make it persistent, or delete it, in its undo). Without
	// it, a named tap that exists is opened (attached to), as libvirt and
	// QEMU do.
	Exclusive bool
	// OwnQueues opens an existing tap only if no queue is attached to it
	// (IFLA_TUN_NUM_QUEUES and IFLA_TUN_NUM_DISABLED_QUEUES, counted
	// before opening and again after): a multiqueue tap whose queues
	// another process holds (another VM) would be shared, and its MTU
	// and offloads are the other process's too. Such a tap gives ErrBusy
	// and is not changed. (The kernel itself refuses a second queue on a
	// single-queue tap with EBUSY.)
	OwnQueues bool
	// Alias is set as the new tap's alias (IFLA_IFALIAS, ip link set
	// NAME alias ...) before it is made persistent, so that a process
	// killed at any moment never leaves a persistent tap without it
	// (a tap that is not yet persistent goes away with the killed
	// process's fds). Only with Exclusive: another's tap is not
	// relabelled. At most 255 bytes.
	Alias string
}

// tapOpensHook, set only by tests, runs between CreateTap's first look at
// an existing tap and its opens: where another process may attach.
var tapOpensHook func()

// Tap is an open tap device with one fd per queue. Safe for concurrent use.
type Tap struct {
	queueSet
	persistent bool
}

// CreateTap creates (or attaches to) a tap with IFF_TAP|IFF_NO_PI and, if
// asked, IFF_VNET_HDR with the given header size, opening Queues queues.
// With Exclusive it only creates (IFF_TUN_EXCL): an existing Name gives
// ErrConflict and is left alone. On
// any failure every fd it opened is closed, so a new tap goes away again.
// The Tap owns the queue fds (QueueFD lends them) and closes them in Close.
// Equivalent: ip tuntap add mode tap vnet_hdr [multi_queue].
func CreateTap(cfg TapConfig) (*Tap, error) {
	queues, err := checkConfig(KindTap, cfg.VnetHdrSize, cfg.Name, cfg.Queues)
	if err != nil {
		return nil, err
	}
	if cfg.VnetHdrSize != 0 && !cfg.VnetHdr {
		return nil, fmt.Errorf("tap: a virtio-net header size needs VnetHdr (IFF_VNET_HDR): %w", ErrInvalid)
	}
	if cfg.MTU != 0 {
		if err := checkTapMTU(cfg.MTU); err != nil {
			return nil, err
		}
	}
	if cfg.Alias != "" && (!cfg.Exclusive || len(cfg.Alias) > 255) {
		return nil, fmt.Errorf("tap: alias %.64q: an alias is set only on a tap this call creates (Exclusive), of at most 255 bytes: %w", cfg.Alias, ErrInvalid)
	}
	if cfg.SndBuf < 0 {
		return nil, fmt.Errorf("tap: send buffer %d: use 1 to %d bytes, or 0 for the kernel's default: %w", cfg.SndBuf, math.MaxInt32, ErrInvalid)
	}
	flags := uint16(linux.IFF_TAP | linux.IFF_NO_PI)
	if cfg.VnetHdr {
		flags |= linux.IFF_VNET_HDR
	}
	if queues > 1 {
		flags |= linux.IFF_MULTI_QUEUE
	}
	if !cfg.Exclusive {
		if err := checkExisting(cfg.Name, queues, cfg.VnetHdr); err != nil {
			return nil, err
		}
		if cfg.OwnQueues {
			if err := checkNoQueues(cfg.Name, 0); err != nil {
				return nil, err
			}
		}
	}
	if tapOpensHook != nil {
		tapOpensHook()
	}
	t := &Tap{queueSet: queueSet{kind: KindTap, name: cfg.Name}}
	ok := false
	defer func() {
		if !ok {
			for _, fd := range t.fds {
				unix.Close(fd)
			}
		}
	}()
	dev := cfg.TunDevice
	if dev == "" {
		dev = TunPath
	}
	for q := 0; q < queues; q++ {
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
				return nil, fmt.Errorf("tap: %s: %w: load the tun module (modprobe tun): %w", dev, err, ErrNotAvailable)
			case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
				return nil, fmt.Errorf("tap: %s: %w: this user may not open it; run as root, or make it "+
					"read-write for this user (most distributions ship it as 0666: chmod 0666 %s)", dev, err, dev)
			}
			return nil, fmt.Errorf("tap: open %s: %w", dev, err)
		}
		t.fds = append(t.fds, fd)
		var ifr linux.Ifreq
		copy(ifr.Name[:], t.name)
		ifr.Flags = flags
		if q == 0 && cfg.Exclusive {
			ifr.Flags |= linux.IFF_TUN_EXCL // queues 1.. attach to the tap queue 0 made
		}
		if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
			if q == 0 && cfg.Exclusive && errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("tap: %s exists (made by someone else, perhaps at this very moment), and netctl "+
					"was asked to create it: pick another name, or delete it (ip link del %s): %w (%w)", cfg.Name, cfg.Name, ErrConflict, err)
			}
			if errors.Is(err, unix.EPERM) {
				return nil, fmt.Errorf("tap: creating %q needs CAP_NET_ADMIN (run as root), or an existing "+
					"persistent tap owned by this user or group: %w", cfg.Name, err)
			}
			if errors.Is(err, unix.EINVAL) {
				if why := checkExisting(t.name, queues, cfg.VnetHdr); why != nil {
					return nil, fmt.Errorf("%w (%w)", why, err)
				}
			}
			return nil, fmt.Errorf("tap: %q queue %d: %w", t.name, q, err)
		}
		t.name = unix.ByteSliceToString(ifr.Name[:]) // queues 1.. attach to the name queue 0 got
	}
	if cfg.OwnQueues && !cfg.Exclusive {
		// Someone may have attached between the first count and the
		// opens: the tap must hold exactly the queues opened here. This
		// comes before anything is set: the header size, its byte order
		// and the send buffer are the device's, not a queue's.
		if err := checkNoQueues(t.name, len(t.fds)); err != nil {
			return nil, err
		}
	}
	for q, fd := range t.fds {
		if cfg.VnetHdrSize != 0 {
			if err := linux.SetI32(fd, linux.TUNSETVNETHDRSZ, int32(cfg.VnetHdrSize)); err != nil {
				return nil, fmt.Errorf("tap %s queue %d: header size %d: %w", t.name, q, cfg.VnetHdrSize, err)
			}
		}
		if cfg.VnetLE {
			if err := linux.SetI32(fd, linux.TUNSETVNETLE, 1); err != nil {
				return nil, fmt.Errorf("tap %s queue %d: little-endian header: %w", t.name, q, err)
			}
		}
		if cfg.SndBuf != 0 {
			if err := linux.SetI32(fd, linux.TUNSETSNDBUF, int32(cfg.SndBuf)); err != nil {
				return nil, fmt.Errorf("tap %s queue %d: send buffer %d: %w", t.name, q, cfg.SndBuf, err)
			}
		}
	}
	fd0 := t.fds[0]
	if cfg.MTU != 0 {
		if err := SetLinkMTU(t.name, cfg.MTU); err != nil {
			return nil, fmt.Errorf("tap %s: %w", t.name, err)
		}
	}
	if cfg.Owner != nil {
		if err := linux.IoctlValue(fd0, linux.TUNSETOWNER, uintptr(*cfg.Owner)); err != nil {
			return nil, fmt.Errorf("tap %s: owner %d: %w", t.name, *cfg.Owner, err)
		}
	}
	if cfg.Group != nil {
		if err := linux.IoctlValue(fd0, linux.TUNSETGROUP, uintptr(*cfg.Group)); err != nil {
			return nil, fmt.Errorf("tap %s: group %d: %w", t.name, *cfg.Group, err)
		}
	}
	if cfg.Alias != "" {
		l, err := netlink.LinkByName(t.name)
		if err == nil {
			err = netlink.LinkSetAlias(l, cfg.Alias)
		}
		if err != nil {
			return nil, fmt.Errorf("tap %s: alias %q: %w", t.name, cfg.Alias, err)
		}
	}
	if cfg.Persistent {
		if err := linux.IoctlValue(fd0, linux.TUNSETPERSIST, 1); err != nil {
			return nil, fmt.Errorf("tap %s: persist: %w", t.name, err)
		}
		t.persistent = true
	}
	ok = true
	return t, nil
}

// checkExisting explains why an existing interface called name cannot be
// opened as asked, before the kernel answers with a bare EINVAL: it is not
// a tap, or its multiqueue flag differs, or its queues would lose or gain
// the virtio-net header.
func checkExisting(name string, queues int, vnetHdr bool) error {
	if name == "" || strings.Contains(name, "%") {
		return nil
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil // does not exist (or cannot be read): the kernel will tell
	}
	tt, ok := l.(*netlink.Tuntap)
	if !ok {
		return fmt.Errorf("tap: %s exists and is a %s link, not a tap: pick another name", name, l.Type())
	}
	if tt.Mode != netlink.TUNTAP_MODE_TAP {
		return fmt.Errorf("tap: %s exists as a tun (layer 3) device; vhost-net needs a tap: delete it (ip link del %s) or pick another name", name, name)
	}
	mq := tt.Flags&netlink.TUNTAP_MULTI_QUEUE != 0
	if queues > 1 && !mq {
		return fmt.Errorf("tap: %s exists as a single-queue tap, so it cannot have %d queues: "+
			"delete it (ip link del %s) and let netctl create it with multi_queue, or ask for 1 queue", name, queues, name)
	}
	if queues == 1 && mq {
		return fmt.Errorf("tap: %s exists as a multiqueue tap; open it with more than one queue "+
			"(or delete it with ip link del %s to get a single-queue tap)", name, name)
	}
	if mq && tt.Queues > 0 && (tt.Flags&netlink.TUNTAP_VNET_HDR != 0) != vnetHdr {
		has := "with"
		if !vnetHdr {
			has = "without"
		}
		return fmt.Errorf("tap: %s has %d queue(s) attached that were opened %s a virtio-net header; "+
			"new queues must match them (vnet_hdr %v)", name, tt.Queues, oppose(has), !vnetHdr)
	}
	return nil
}

// checkNoQueues refuses a tap name that has more queues attached
// (enabled or detached) than the own ones this process opened: another
// process holds the rest.
func checkNoQueues(name string, own int) error {
	if name == "" || strings.Contains(name, "%") {
		return nil
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil // does not exist (yet): the opens will create it
	}
	tt, ok := l.(*netlink.Tuntap)
	if !ok {
		return nil // checkExisting says what it is
	}
	if n := tt.Queues + tt.DisabledQueues; n > own {
		return fmt.Errorf("tap: %s has %d queue(s) that another process holds (another VM?): joining it would share the tap with it, "+
			"and an MTU or offload set here would change its link too; pick a tap of its own, or say --shared-tap to share it: %w",
			name, n-own, ErrBusy)
	}
	return nil
}

func oppose(w string) string {
	if w == "with" {
		return "without"
	}
	return "with"
}

// SetOffloads sets what the reader of the tap accepts (TUNSETOFFLOAD, for
// the whole device). Every flag needs CSUM; USO4 and USO6 go together and
// need Linux 6.2: a kernel without them answers EINVAL, and the error says
// so.
func (t *Tap) SetOffloads(o Offloads) error { return t.setOffloads(o) }

// DetachQueue stops queue q from receiving or sending (TUNSETQUEUE with
// IFF_DETACH_QUEUE; multiqueue taps only); AttachQueue undoes it.
func (t *Tap) DetachQueue(q int) error { return t.setQueue(q, linux.IFF_DETACH_QUEUE) }

// AttachQueue attaches a queue detached with DetachQueue again.
func (t *Tap) AttachQueue(q int) error { return t.setQueue(q, linux.IFF_ATTACH_QUEUE) }

func (t *Tap) setQueue(q int, flag uint16) error {
	fd := t.QueueFD(q)
	if fd < 0 {
		if n := t.Queues(); n == 0 {
			return fmt.Errorf("tap %s: queue %d: %w", t.name, q, ErrClosed)
		} else {
			return fmt.Errorf("tap %s: no queue %d: it has queues 0 to %d: %w", t.name, q, n-1, ErrInvalid)
		}
	}
	var ifr linux.Ifreq
	ifr.Flags = flag
	if err := linux.Ioctl(fd, linux.TUNSETQUEUE, unsafe.Pointer(&ifr)); err != nil {
		if errors.Is(err, unix.EINVAL) && flag == linux.IFF_DETACH_QUEUE {
			return fmt.Errorf("tap %s: detach queue %d: only multiqueue taps can detach queues: %w", t.name, q, err)
		}
		return fmt.Errorf("tap %s: queue %d: %w", t.name, q, err)
	}
	return nil
}

// SetMTU sets the tap's MTU: 68 to 65521 (tun's 65535 less the Ethernet
// header); anything else is refused with ErrInvalid and changes nothing.
func (t *Tap) SetMTU(mtu int) error {
	if err := checkTapMTU(mtu); err != nil {
		return err
	}
	return SetLinkMTU(t.name, mtu)
}

// checkTapMTU validates a tap's MTU.
func checkTapMTU(mtu int) error {
	if mtu < minMTU || mtu > maxTapMTU {
		return fmt.Errorf("tap: MTU %d: a tap takes %d to %d: %w", mtu, minMTU, maxTapMTU, ErrInvalid)
	}
	return nil
}

// SetMAC and Up configure the tap's link.
func (t *Tap) SetMAC(mac net.HardwareAddr) error { return SetLinkMAC(t.name, mac) }
func (t *Tap) Up() error                         { return LinkUp(t.name) }

// Delete removes a persistent tap (TUNSETPERSIST 0) and closes it.
func (t *Tap) Delete() error {
	if err := t.do(linux.TUNSETPERSIST, func(fd int) error {
		return linux.IoctlValue(fd, linux.TUNSETPERSIST, 0)
	}); err != nil {
		return err
	}
	return t.Close()
}

// Close closes every queue; a non-persistent tap goes away with the last.
// Closing twice is not an error.
func (t *Tap) Close() error { return t.closeFDs() }

// CheckTap says, opening nothing, whether CreateTap could open the
// existing tap name with queues queues (and a virtio-net header when
// vnetHdr), and, when own, that no process holds a queue of it (another
// VM's tap): the same checks CreateTap makes first. A tap that does not
// exist passes (CreateTap would create it).
func CheckTap(name string, queues int, vnetHdr, own bool) error {
	if err := checkExisting(name, queues, vnetHdr); err != nil {
		return err
	}
	if !own {
		return nil
	}
	if err := checkNoQueues(name, 0); err != nil {
		return err
	}
	// The kernel counts queues only for a multiqueue tap; a single-queue
	// one is held when it is not persistent (it exists only while a
	// process holds it) or has carrier (a process attached to it).
	l, err := netlink.LinkByName(name)
	tt, ok := l.(*netlink.Tuntap)
	if err != nil || !ok || tt.Flags&netlink.TUNTAP_MULTI_QUEUE != 0 {
		return nil
	}
	carrier, _ := os.ReadFile(filepath.Join("/sys/class/net", name, "carrier"))
	if tt.NonPersist || strings.TrimSpace(string(carrier)) == "1" {
		return fmt.Errorf("tap: %s is held by another process (another VM?): pick a tap of its own: %w", name, ErrBusy)
	}
	return nil
}
