package macvtap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
	return 0, fmt.Errorf("macvtap: unknown mode %q: use bridge, vepa, private, passthru or source", s)
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
	Queues     int // queues to open (each open of /dev/tapN is one); 0 means 1
	// NoVnetHdr turns the virtio-net header off (macvtap queues start
	// with it on, at 10 bytes).
	NoVnetHdr   bool
	VnetHdrSize int // 10, 12 or 20; 0 keeps 10
	// DevDir holds the tapN character devices (default /dev); a missing
	// node is created from the major:minor in sysfs.
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

// CreateMacvtap creates a macvtap on a lower device and opens its queues.
// On any failure nothing is left: no fd, no link. Equivalent:
// ip link add link LOWER name NAME type macvtap mode MODE; open /dev/tapN.
func CreateMacvtap(cfg MacvtapConfig) (*Macvtap, error) {
	queues, err := checkConfig(KindMacvtap, cfg.VnetHdrSize, cfg.Name, cfg.Queues)
	if err != nil {
		return nil, err
	}
	if cfg.NoVnetHdr && cfg.VnetHdrSize != 0 {
		return nil, errors.New("macvtap: a virtio-net header size needs the header on")
	}
	if _, ok := modeNames[cfg.Mode]; !ok {
		return nil, fmt.Errorf("macvtap: unknown mode %d: use bridge, vepa, private, passthru or source", int(cfg.Mode))
	}
	if cfg.Lower == "" {
		return nil, errors.New("macvtap: no lower device: name the interface the macvtap sits on")
	}
	lower, err := netlink.LinkByName(cfg.Lower)
	if err != nil {
		return nil, fmt.Errorf("macvtap: lower device %q does not exist (%v): name an existing interface (ip link show)", cfg.Lower, err)
	}
	if cfg.Mode != ModeSource && len(cfg.SourceMACs) > 0 {
		return nil, errors.New("macvtap: source MACs need mode source")
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
		attrs.Name, attrs.ParentIndex, attrs.HardwareAddr = name, lower.Attrs().Index, cfg.MAC
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
			return nil, fmt.Errorf("macvtap: %q already exists: pick another name or delete it (ip link del %s): %w", cfg.Name, cfg.Name, err)
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("macvtap: this kernel cannot create macvtap links: load the macvtap module (modprobe macvtap): %w", err)
		case errors.Is(err, unix.EINVAL) && cfg.Mode == ModePassthru:
			return nil, fmt.Errorf("macvtap: passthru mode: the lower device %s already has a macvlan or macvtap: %w", cfg.Lower, err)
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
	node, err := tapNode(m.name, m.ifindex, cfg.DevDir)
	if err != nil {
		return nil, err
	}
	for q := 0; q < queues; q++ {
		fd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("macvtap %s: open %s (queue %d): %w", m.name, node, q, err)
		}
		m.fds = append(m.fds, fd)
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

// tapNode returns the /dev/tapN node of a macvtap, creating it from the
// major:minor in sysfs when udev has not (or DevDir is not /dev).
func tapNode(name string, ifindex int, devDir string) (string, error) {
	if devDir == "" {
		devDir = "/dev"
	}
	tap := "tap" + strconv.Itoa(ifindex)
	sys := filepath.Join("/sys/class/net", name, "macvtap", tap, "dev")
	b, err := os.ReadFile(sys)
	if err != nil {
		return "", fmt.Errorf("macvtap %s: read %s: %w (is /sys mounted in this network namespace?)", name, sys, err)
	}
	var maj, min uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min); err != nil {
		return "", fmt.Errorf("macvtap %s: %s holds %q: %w", name, sys, b, err)
	}
	node := filepath.Join(devDir, tap)
	var st unix.Stat_t
	if err := unix.Stat(node, &st); err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == maj && unix.Minor(st.Rdev) == min {
			return node, nil
		}
		// A stale node from an earlier device with this ifindex.
		if err := os.Remove(node); err != nil {
			return "", fmt.Errorf("macvtap %s: %s is not %d:%d and cannot be replaced: %w", name, node, maj, min, err)
		}
	}
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(maj, min))); err != nil {
		return "", fmt.Errorf("macvtap %s: create %s (%d:%d): %w", name, node, maj, min, err)
	}
	return node, nil
}
func (m *Macvtap) Lower() string { return m.lower }

// SetOffloads sets what the macvtap's reader accepts (TUNSETOFFLOAD).
// Unlike tun, macvtap silently ignores TSO or USO without CSUM, and USO4
// without USO6: netctl refuses those combinations itself, so what is set
// is what was asked.
func (m *Macvtap) SetOffloads(o Offloads) error {
	if o&^OffloadCSUM != 0 && o&OffloadCSUM == 0 {
		return fmt.Errorf("macvtap %s: offloads %v: every offload needs csum", m.name, o)
	}
	if (o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0) {
		return fmt.Errorf("macvtap %s: offloads %v: uso4 and uso6 go together", m.name, o)
	}
	return m.setOffloads(o)
}

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
