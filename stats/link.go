package stats

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// readLink reads the host link's rtnetlink stats64 (like `ip -s link show
// NAME`) and names them from the guest's side (see linkStats: a tap's tx
// is the guest's rx, a macvtap's rx is). With an ifindex the link must still have that index and name (a tap
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
	_, mv := l.(*netlink.Macvtap)
	return linkStats(st, mv), nil
}

// linkStats names the host link's counters from the guest's side.
//
// A tap is the guest's wire seen from the host: what the guest writes
// into the tap's fd enters the host (tun_get_user, the tap's rx), what
// the host sends out the tap reaches the guest (the tap's tx): flipped.
// A macvtap is not: what the guest writes into its queue leaves through
// the macvlan device's transmit path (the macvtap's tx), and what comes
// from the lower device is counted as the macvtap's rx before it is
// queued to the guest (macvlan_handle_frame). TestHostLink and
// TestHostLinkMacvtap measure both.
func linkStats(st *netlink.LinkStatistics, macvtap bool) *LinkStats {
	rx := Counters{Packets: st.RxPackets, Bytes: st.RxBytes, Errors: st.RxErrors, Drops: st.RxDropped}
	tx := Counters{Packets: st.TxPackets, Bytes: st.TxBytes, Errors: st.TxErrors, Drops: st.TxDropped}
	if macvtap {
		return &LinkStats{RX: rx, TX: tx}
	}
	return &LinkStats{RX: tx, TX: rx}
}
