package hostnic

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
)

// MacvtapAlias is the mark (the link's alias) of a macvtap the CNI plugin
// moved into a pod's namespace: DEL deletes a macvtap of the pod's
// interface name only while it carries it.
const MacvtapAlias = "netctl cni macvtap"

// MarkedLinkIndex is the ifindex of the link name in the calling
// thread's namespace if it is of type kind ("tuntap", "macvtap") and
// carries alias, else 0.
func MarkedLinkIndex(name, kind, alias string) int {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != kind || l.Attrs().Alias != alias {
		return 0
	}
	return l.Attrs().Index
}

// MoveMarkedLink marks link name (ifindex, in the calling thread's
// namespace) with alias, moves it into the network namespace at nsPath
// and there renames it newName and sets it up; it returns the link's
// ifindex there. Nothing is left behind on failure: the link is deleted
// (the caller created it for this). A link called newName in the target
// namespace is refused (errs.ErrConflict).
func MoveMarkedLink(name string, ifindex int, alias, nsPath, newName string) (int, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil || l.Attrs().Name != name {
		return 0, fmt.Errorf("link %s (ifindex %d): gone before it was moved: %w", name, ifindex, errs.ErrBusy)
	}
	target, err := OpenNetNS(nsPath)
	if err != nil {
		macvtap.DeleteLinkIfSame(name, ifindex)
		return 0, fmt.Errorf("network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	// Route only: a kernel without XFRM (the 6.12 test VM's) refuses a
	// handle with every family.
	h, err := netlink.NewHandleAt(target, unix.NETLINK_ROUTE)
	if err != nil {
		macvtap.DeleteLinkIfSame(name, ifindex)
		return 0, fmt.Errorf("network namespace %s: %w", nsPath, err)
	}
	defer h.Close()
	if err := netlink.LinkSetAlias(l, alias); err != nil {
		macvtap.DeleteLinkIfSame(name, ifindex)
		return 0, fmt.Errorf("link %s: alias: %w", name, err)
	}
	if err := netlink.LinkSetNsFd(l, int(target)); err != nil {
		macvtap.DeleteLinkIfSame(name, ifindex)
		return 0, fmt.Errorf("link %s: move into %s: %w", name, nsPath, err)
	}
	// The kernel keeps the ifindex when it is free in the target; find
	// the link by its mark there, whatever its index.
	var moved netlink.Link
	links, err := h.LinkList()
	if err != nil {
		return 0, fmt.Errorf("network namespace %s: list links: %w", nsPath, err)
	}
	for _, x := range links {
		if x.Attrs().Name == name && x.Attrs().Alias == alias {
			moved = x
		}
	}
	if moved == nil {
		return 0, fmt.Errorf("link %s: not found in %s after the move: %w", name, nsPath, errs.ErrBusy)
	}
	undo := func() { h.LinkDel(moved) } // best effort: a DEL finds what is left by its mark
	if x, err := h.LinkByName(newName); err == nil {
		undo()
		return 0, fmt.Errorf("%s: a %s link of that name exists in the pod's namespace and netctl did not create it: "+
			"give the pod another interface name: %w", newName, x.Type(), errs.ErrConflict)
	}
	if err := h.LinkSetName(moved, newName); err != nil {
		undo()
		return 0, fmt.Errorf("link %s: rename to %s: %w", name, newName, err)
	}
	if err := h.LinkSetUp(moved); err != nil {
		undo()
		return 0, fmt.Errorf("link %s: up: %w", newName, err)
	}
	return moved.Attrs().Index, nil
}

// CNITapAlias is the mark of a tap the CNI plugin made in a pod's
// namespace: not the hook's (TapAlias), so that neither takes the
// other's tap for its own.
const CNITapAlias = "netctl cni tap"
