package hostnic

import (
	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/macvtap"
)

func (Real) DeleteLink(name string, ifindex int) error {
	return macvtap.DeleteLinkIfSame(name, ifindex)
}

func (Real) LinkExists(name string, ifindex int) bool {
	l, err := netlink.LinkByName(name)
	return err == nil && (ifindex == 0 || l.Attrs().Index == ifindex)
}
