package stats

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// readLink reads the host link's rtnetlink stats64 (like `ip -s link show
// NAME`) and names them from the guest's side: the tap's tx is the guest's
// rx. With an ifindex the link must still have that index and name (a tap
// deleted and another made under the same name is not this NIC's).
func readLink(h *netlink.Handle, name string, ifindex int) (*LinkStats, error) {
	var l netlink.Link
	var err error
	if ifindex > 0 {
		l, err = h.LinkByIndex(ifindex)
		if err == nil && l.Attrs().Name != name {
			return nil, fmt.Errorf("link %s (ifindex %d) is gone: ifindex %d is now %s (the NIC was detached?)", name, ifindex, ifindex, l.Attrs().Name)
		}
	} else {
		l, err = h.LinkByName(name)
	}
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("link %s is gone (the NIC was detached, or it lives in another network namespace: run netctl there)", name)
		}
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return nil, fmt.Errorf("link %s: the kernel sent no statistics", name)
	}
	return linkStats(st), nil
}

// linkStats flips the host link's directions to the guest's side.
func linkStats(st *netlink.LinkStatistics) *LinkStats {
	return &LinkStats{
		RX: Counters{Packets: st.TxPackets, Bytes: st.TxBytes, Errors: st.TxErrors, Drops: st.TxDropped},
		TX: Counters{Packets: st.RxPackets, Bytes: st.RxBytes, Errors: st.RxErrors, Drops: st.RxDropped},
	}
}
