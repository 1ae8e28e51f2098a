package macvtap

import (
	"errors"
	"fmt"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// Kind names a backend type.
type Kind string

// The three kinds of socket vhost-net accepts as a backend.
const (
	KindTap     Kind = "tap"
	KindMacvtap Kind = "macvtap"
	KindPacket  Kind = "packet"
)

// Backend is what vhost-net attaches to: a tap, a macvtap or a packet
// socket, with one fd per queue, a virtio-net header size and receive
// offloads. The backend owns its fds: QueueFD lends one, valid until Close.
// To learn which offloads the kernel takes, use ProbeOffloads, which tries
// them on a scratch device rather than on a backend that carries traffic.
type Backend interface {
	Kind() Kind
	Name() string  // the interface
	Lower() string // the device underneath (macvtap, packet socket), or ""
	Queues() int
	QueueFD(q int) int
	// VnetHdrSize is the virtio-net header size in use (0: none, packet
	// sockets only).
	VnetHdrSize() (int, error)
	SetVnetHdrSize(n int) error
	SetOffloads(Offloads) error
	Offloads() Offloads // as last set
	Close() error
}

var (
	_ Backend = (*Tap)(nil)
	_ Backend = (*Macvtap)(nil)
	_ Backend = (*PacketSocket)(nil)
)

// VnetHdrSizeFor is the header size a guest's features need: 20 with
// HASH_REPORT (struct virtio_net_hdr_v1_hash), else 12 with VERSION_1 or
// MRG_RXBUF, else 10.
func VnetHdrSizeFor(acked virtio.Features) int {
	switch {
	case acked.Has(virtio.NetHashReport):
		return linux.VIRTIO_NET_HDR_V1_HASH_LEN
	case acked&(virtio.Version1|virtio.NetMrgRxbuf) != 0:
		return linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN
	}
	return linux.VIRTIO_NET_HDR_LEN
}

// ApplyGuestFeatures sets the backend's header size (VnetHdrSizeFor) and
// receive offloads (OffloadsFor) for the features the guest acknowledged,
// as one step: if either is refused, the header size and offloads are as
// they were before the call. Offloads this kernel refuses (USO before Linux
// 6.2) are left off, and the decision says why. It returns the decision
// actually applied.
func ApplyGuestFeatures(b Backend, acked virtio.Features) (OffloadDecision, error) {
	oldHdr, err := b.VnetHdrSize()
	if err != nil {
		return OffloadDecision{}, err
	}
	hdr := VnetHdrSizeFor(acked)
	if hdr != oldHdr {
		// SetVnetHdrSize changes every queue or none.
		if err := b.SetVnetHdrSize(hdr); err != nil {
			return OffloadDecision{}, err
		}
	}
	undo := func(err error) (OffloadDecision, error) {
		if hdr != oldHdr {
			if rerr := b.SetVnetHdrSize(oldHdr); rerr != nil {
				return OffloadDecision{}, fmt.Errorf("%w (and restoring the %d-byte header failed: %v)", err, oldHdr, rerr)
			}
		}
		return OffloadDecision{}, err
	}
	d := OffloadsFor(acked)
	err = b.SetOffloads(d.Offloads)
	uso := d.Offloads & (OffloadUSO4 | OffloadUSO6)
	if err != nil && errors.Is(err, ErrNotSupported) && uso != 0 {
		if err2 := b.SetOffloads(d.Offloads &^ uso); err2 != nil {
			return undo(err2)
		}
		d.Offloads &^= uso
		for _, f := range []virtio.Features{virtio.NetGuestUSO4, virtio.NetGuestUSO6} {
			d.Dropped[f] = fmt.Sprintf("this kernel's %s refuses TUN_F_USO4/USO6; UDP segmentation offload needs Linux 6.2", b.Kind())
		}
		return d, nil
	}
	if err != nil {
		return undo(err)
	}
	return d, nil
}

func (t *Tap) Lower() string { return "" }

func (p *PacketSocket) Kind() Kind    { return KindPacket }
func (p *PacketSocket) Lower() string { return p.iface }
func (p *PacketSocket) Queues() int   { return 1 }

// QueueFD returns the socket for queue 0 (a packet socket is one queue),
// still owned by the PacketSocket; -1 for any other queue or after Close.
func (p *PacketSocket) QueueFD(q int) int {
	if q != 0 {
		return -1
	}
	return p.FD()
}

// SetOffloads records o. A packet socket has no TUNSETOFFLOAD: it hands
// the guest GSO frames whenever the interface produces them (GRO), so a
// guest without GUEST_TSO needs GRO off on the interface (ethtool -K IF gro
// off). Without a virtio-net header no offload can be conveyed.
func (p *PacketSocket) SetOffloads(o Offloads) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return fmt.Errorf("packet socket on %s: offloads: %w", p.iface, ErrClosed)
	}
	if o&^OffloadAll != 0 {
		return fmt.Errorf("packet socket on %s: offloads %v: unknown flags; netctl knows %v: %w", p.iface, o, OffloadAll, ErrInvalid)
	}
	if o != 0 && p.hdr == 0 {
		return fmt.Errorf("packet socket on %s: offloads %v need a virtio-net header: %w", p.iface, o, ErrInvalid)
	}
	p.offloads = o
	return nil
}

func (p *PacketSocket) Offloads() Offloads {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offloads
}
