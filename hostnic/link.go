package hostnic

import (
	"fmt"

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

// LinkName is the name of the link with ifindex in this namespace (a tap
// CreateTap made from a template such as TapTemplate, whose name the
// kernel chose).
func LinkName(ifindex int) (string, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return "", fmt.Errorf("link %d: %w", ifindex, err)
	}
	return l.Attrs().Name, nil
}
