package libvirtdom

import (
	"context"
)

// IfaceStats are libvirt's counters of a domain's interface as the guest
// sees them (libvirt swaps a tap's rx and tx: RX is what the guest
// received).
type IfaceStats struct {
	RxBytes, RxPackets, RxErrs, RxDrop int64
	TxBytes, TxPackets, TxErrs, TxDrop int64
}

// InterfaceStats reads the counters of the domain's interface dev (its
// <target dev>, or its MAC) with virDomainInterfaceStats, as virsh
// domifstat does. The domain must be running. libvirt reports none for a
// vdpa interface (it has no host netdev).
func (c *Conn) InterfaceStats(ctx context.Context, d Domain, dev string) (IfaceStats, error) {
	var s IfaceStats
	err := c.do(ctx, "interface stats of "+d.Name+" "+clip(dev), func() (err error) {
		s, err = c.l.DomainInterfaceStats(d.d, dev)
		return
	})
	return s, err
}
