package macvtap

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkUp sets IFF_UP on the named interface of the calling thread's network
// namespace (like ip link set NAME up).
func LinkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

// SetLinkMTU sets an interface's MTU (like ip link set NAME mtu N): 68 to
// 65535; the device may take less (a tap at most 65521, a macvtap at most
// its lower device's MTU), and then the kernel's refusal wraps ErrInvalid.
func SetLinkMTU(name string, mtu int) error {
	if mtu < minMTU || mtu > 65535 {
		return fmt.Errorf("link %s: MTU %d: use %d to 65535: %w", name, mtu, minMTU, ErrInvalid)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("link %s: MTU %d: out of this device's range (a tap takes up to 65521, a macvtap up to its lower device's MTU): %w: %w",
				name, mtu, ErrInvalid, err)
		}
		return fmt.Errorf("link %s: mtu %d: %w", name, mtu, err)
	}
	return nil
}

// SetLinkMAC sets an interface's MAC address (like ip link set NAME
// address MAC).
func SetLinkMAC(name string, mac net.HardwareAddr) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := netlink.LinkSetHardwareAddr(l, mac); err != nil {
		return fmt.Errorf("link %s: address %s: %w", name, mac, err)
	}
	return nil
}

// DeleteLinkIfSame deletes the link name of the calling thread's network
// namespace if it still has ifindex (0: any): a link created by netctl
// whose name another link has taken since is not netctl's to delete. A
// link that is gone is not an error.
func DeleteLinkIfSame(name string, ifindex int) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil
	}
	if ifindex != 0 && l.Attrs().Index != ifindex {
		return nil // another link took the name: not ours
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}
