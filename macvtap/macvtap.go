package macvtap

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// Mode is a macvtap (macvlan) mode: how the device forwards between
// siblings on the same lower device.
type Mode int

// Modes, as "ip link add ... type macvtap mode MODE" names them.
const (
	ModeBridge   Mode = iota // siblings talk directly
	ModeVEPA                 // everything goes out to the adjacent switch
	ModePrivate              // no sibling traffic at all
	ModePassthru             // one macvtap owns the lower device
	ModeSource               // receive only from listed source MACs
)

var modeNames = map[Mode]string{ModeBridge: "bridge", ModeVEPA: "vepa", ModePrivate: "private", ModePassthru: "passthru", ModeSource: "source"}

func (m Mode) String() string {
	if n, ok := modeNames[m]; ok {
		return n
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if strings.EqualFold(s, n) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("macvtap: unknown mode %q: use bridge, vepa, private, passthru or source: %w", s, ErrInvalid)
}

func (m Mode) netlink() netlink.MacvlanMode {
	return map[Mode]netlink.MacvlanMode{ModeBridge: netlink.MACVLAN_MODE_BRIDGE, ModeVEPA: netlink.MACVLAN_MODE_VEPA,
		ModePrivate: netlink.MACVLAN_MODE_PRIVATE, ModePassthru: netlink.MACVLAN_MODE_PASSTHRU, ModeSource: netlink.MACVLAN_MODE_SOURCE}[m]
}

// MacvtapConfig says what macvtap to create.
type MacvtapConfig struct {
	Name  string // interface name, or a template with %d; empty means "macvtap%d"
	Lower string // the lower device (a NIC, veth, dummy, bond...)
	Mode  Mode
	MAC   net.HardwareAddr // empty: a random one
	// SourceMACs are the senders a ModeSource macvtap receives from.
	SourceMACs []net.HardwareAddr
	// Queues to open, 1 to 256 (each open of /dev/tapN is one; macvtap
	// has at most MAX_TAP_QUEUES = 256); 0 means 1.
	Queues int
	// MTU of the macvtap, 68 up to the lower device's MTU (macvlan
	// refuses more); 0 takes the lower device's MTU.
	MTU int
	// NoVnetHdr turns the virtio-net header off (macvtap queues start
	// with it on, at 10 bytes).
	NoVnetHdr   bool
	VnetHdrSize int // 10, 12 or 20; 0 keeps 10
	// DevDir is where udev puts the tapN character devices (default
	// /dev). netctl opens DevDir/tapN only when it is this macvtap's
	// device (the major:minor in sysfs); otherwise it opens the queues
	// through a private node in a fresh directory of its own (under
	// os.TempDir(), or under DevDir when the temporary directory is on a
	// nodev mount), removed before CreateMacvtap returns. No node in
	// DevDir is ever created, replaced or removed.
	DevDir string
}

// Macvtap is a macvtap link and its open queues. Close deletes the link if
// CreateMacvtap created it. Safe for concurrent use.
type Macvtap struct {
	queueSet
	lower   string
	ifindex int
	created bool
}

// Ifindex is the macvtap's interface index in its network namespace (the
// N of tapN).
func (m *Macvtap) Ifindex() int { return m.ifindex }

// CreateMacvtap creates a macvtap on a lower device and opens its queues.
// Bad input is refused with ErrInvalid before anything is created. On any
// failure nothing is left: no fd, no link, no device node. The Macvtap owns
// the queue fds. Equivalent: ip link add link LOWER name NAME [mtu MTU]
// type macvtap mode MODE; open /dev/tapN once per queue.
func CreateMacvtap(cfg MacvtapConfig) (*Macvtap, error) {
	queues, err := checkConfig(KindMacvtap, cfg.VnetHdrSize, cfg.Name, cfg.Queues)
	if err != nil {
		return nil, err
	}
	if cfg.NoVnetHdr && cfg.VnetHdrSize != 0 {
		return nil, fmt.Errorf("macvtap: a virtio-net header size needs the header on: %w", ErrInvalid)
	}
	if _, ok := modeNames[cfg.Mode]; !ok {
		return nil, fmt.Errorf("macvtap: unknown mode %d: use bridge, vepa, private, passthru or source: %w", int(cfg.Mode), ErrInvalid)
	}
	if cfg.Lower == "" {
		return nil, fmt.Errorf("macvtap: no lower device: name the interface the macvtap sits on: %w", ErrInvalid)
	}
	if cfg.Mode != ModeSource && len(cfg.SourceMACs) > 0 {
		return nil, fmt.Errorf("macvtap: source MACs need mode source: %w", ErrInvalid)
	}
	lower, err := netlink.LinkByName(cfg.Lower)
	if err != nil {
		return nil, fmt.Errorf("macvtap: lower device %q does not exist (%v): name an existing interface (ip link show): %w", cfg.Lower, err, ErrInvalid)
	}
	if cfg.MTU != 0 {
		if max := lower.Attrs().MTU; cfg.MTU < minMTU || cfg.MTU > max {
			return nil, fmt.Errorf("macvtap: MTU %d: a macvtap on %s takes %d to %d (the lower device's MTU; raise that first): %w",
				cfg.MTU, cfg.Lower, minMTU, max, ErrInvalid)
		}
	}
	template := cfg.Name
	if template == "" {
		template = "macvtap%d"
	}
	var link *netlink.Macvtap
	for i := 0; ; i++ {
		name := template
		if strings.Contains(template, "%d") {
			name = fmt.Sprintf(template, i)
			if _, err := netlink.LinkByName(name); err == nil {
				continue
			}
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.ParentIndex, attrs.HardwareAddr, attrs.MTU = name, lower.Attrs().Index, cfg.MAC, cfg.MTU
		link = &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: cfg.Mode.netlink(), MACAddrs: cfg.SourceMACs}}
		err = netlink.LinkAdd(link)
		if errors.Is(err, unix.EEXIST) && name != template && i < 1000 {
			continue // taken since we looked: try the next number
		}
		break
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("macvtap: creating a macvtap needs CAP_NET_ADMIN: run as root: %w", err)
		case errors.Is(err, unix.EEXIST):
			return nil, fmt.Errorf("macvtap: %q already exists: pick another name or delete it (ip link del %s): %w: %w", cfg.Name, cfg.Name, ErrConflict, err)
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("macvtap: this kernel cannot create macvtap links: load the macvtap module (modprobe macvtap): %w: %w", ErrNotAvailable, err)
		case errors.Is(err, unix.EINVAL) && cfg.Mode == ModePassthru:
			return nil, fmt.Errorf("macvtap: passthru mode: the lower device %s already has a macvlan or macvtap: %w: %w", cfg.Lower, ErrBusy, err)
		}
		return nil, fmt.Errorf("macvtap: add a %v macvtap on %s: %w", cfg.Mode, cfg.Lower, err)
	}
	m := &Macvtap{queueSet: queueSet{kind: KindMacvtap, name: link.Attrs().Name}, lower: cfg.Lower, created: true, ifindex: link.Attrs().Index}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	l, err := netlink.LinkByName(m.name)
	if err != nil {
		return nil, fmt.Errorf("macvtap: find the new link %s: %w", m.name, err)
	}
	m.ifindex = l.Attrs().Index
	maj, min, err := macvtapDevNumber(m.name, m.ifindex)
	if err != nil {
		return nil, err
	}
	fds, err := openTapQueues(m.name, m.ifindex, cfg.DevDir, maj, min, queues)
	if err != nil {
		return nil, err
	}
	m.fds = fds
	for q, fd := range m.fds {
		var ifr linux.Ifreq
		ifr.Flags = linux.IFF_TAP | linux.IFF_NO_PI
		if !cfg.NoVnetHdr {
			ifr.Flags |= linux.IFF_VNET_HDR
		}
		if queues > 1 {
			ifr.Flags |= linux.IFF_MULTI_QUEUE
		}
		if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
			return nil, fmt.Errorf("macvtap %s queue %d: %w", m.name, q, err)
		}
		// The queue must belong to this macvtap (the node was checked by
		// major:minor; the kernel names the device it serves).
		var got linux.Ifreq
		if err := linux.Ioctl(fd, linux.TUNGETIFF, unsafe.Pointer(&got)); err != nil {
			return nil, fmt.Errorf("macvtap %s queue %d: %w", m.name, q, err)
		}
		if n := unix.ByteSliceToString(got.Name[:]); n != m.name {
			return nil, fmt.Errorf("macvtap %s queue %d: the node opened serves %q: %w", m.name, q, n, ErrConflict)
		}
		if cfg.VnetHdrSize != 0 {
			if err := linux.SetI32(fd, linux.TUNSETVNETHDRSZ, int32(cfg.VnetHdrSize)); err != nil {
				return nil, fmt.Errorf("macvtap %s queue %d: header size %d: %w", m.name, q, cfg.VnetHdrSize, err)
			}
		}
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("macvtap %s: link up: %w", m.name, err)
	}
	ok = true
	return m, nil
}

func (m *Macvtap) Lower() string { return m.lower }

// SetOffloads sets what the macvtap's reader accepts (TUNSETOFFLOAD).
// Unlike tun, macvtap silently ignores TSO or USO without CSUM, and USO4
// without USO6: netctl refuses those combinations itself, so what is set
// is what was asked.
func (m *Macvtap) SetOffloads(o Offloads) error {
	if o&^OffloadCSUM != 0 && o&OffloadCSUM == 0 {
		return fmt.Errorf("macvtap %s: offloads %v: every offload needs csum: %w", m.name, o, ErrInvalid)
	}
	if (o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0) {
		return fmt.Errorf("macvtap %s: offloads %v: uso4 and uso6 go together: %w", m.name, o, ErrInvalid)
	}
	return m.setOffloads(o)
}

// CloseQueues closes the queues and keeps the link, for a caller that
// handed copies of the queue fds to another process (a VMM) that now owns
// the data path; deleting the link is then the caller's business
// (netlink, ip link del). Close after it still deletes a link
// CreateMacvtap created.
func (m *Macvtap) CloseQueues() error { return m.closeFDs() }

// Close closes the queues and, if CreateMacvtap created the link, deletes
// it. Closing twice is not an error.
func (m *Macvtap) Close() error {
	first := m.closeFDs()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.created {
		if l, err := netlink.LinkByName(m.name); err == nil && (m.ifindex == 0 || l.Attrs().Index == m.ifindex) {
			if err := netlink.LinkDel(l); err != nil && first == nil {
				first = fmt.Errorf("macvtap %s: delete: %w", m.name, err)
			}
		}
		m.created = false
	}
	return first
}
