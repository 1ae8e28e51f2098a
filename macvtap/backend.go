package macvtap

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

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
// offloads. The backend owns its fds.
type Backend interface {
	Kind() Kind
	Name() string  // the interface
	Lower() string // the device underneath (macvtap, packet socket), or ""
	Queues() int
	QueueFD(q int) int
	SetVnetHdrSize(n int) error
	// SupportedOffloads is what this kernel lets the backend take, found
	// by trial.
	SupportedOffloads() (Offloads, error)
	SetOffloads(Offloads) error
	Offloads() Offloads // as last set
	Close() error
}

var (
	_ Backend = (*Tap)(nil)
	_ Backend = (*Macvtap)(nil)
	_ Backend = (*PacketSocket)(nil)
)

// VnetHdrSizeFor is the header size a guest's features need: 12 with
// VERSION_1 or MRG_RXBUF, else 10.
func VnetHdrSizeFor(acked virtio.Features) int {
	if acked&(virtio.Version1|virtio.NetMrgRxbuf) != 0 {
		return linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN
	}
	return linux.VIRTIO_NET_HDR_LEN
}

// ApplyGuestFeatures sets the backend's header size and receive offloads
// for the features the guest acknowledged (OffloadsFor). Offloads this
// kernel refuses (USO before Linux 6.2) are left off, and the decision says
// why. It returns the decision actually applied.
func ApplyGuestFeatures(b Backend, acked virtio.Features) (OffloadDecision, error) {
	if err := b.SetVnetHdrSize(VnetHdrSizeFor(acked)); err != nil {
		return OffloadDecision{}, err
	}
	d := OffloadsFor(acked)
	err := b.SetOffloads(d.Offloads)
	uso := d.Offloads & (OffloadUSO4 | OffloadUSO6)
	if err != nil && errors.Is(err, unix.EINVAL) && uso != 0 {
		if err2 := b.SetOffloads(d.Offloads &^ uso); err2 == nil {
			d.Offloads &^= uso
			for _, f := range []virtio.Features{virtio.NetGuestUSO4, virtio.NetGuestUSO6} {
				d.Dropped[f] = fmt.Sprintf("this kernel's %s refuses TUN_F_USO4/USO6; UDP segmentation offload needs Linux 6.2", b.Kind())
			}
			return d, nil
		}
	}
	return d, err
}
func (t *Tap) Lower() string { return "" }

func (p *PacketSocket) Kind() Kind    { return KindPacket }
func (p *PacketSocket) Lower() string { return p.iface }
func (p *PacketSocket) Queues() int   { return 1 }

// QueueFD returns the socket for queue 0 (a packet socket is one queue).
func (p *PacketSocket) QueueFD(q int) int {
	if q != 0 {
		return -1
	}
	return p.FD()
}

// SupportedOffloads: a packet socket cannot refuse what the interface
// delivers, so every offload the virtio-net header can describe passes.
func (p *PacketSocket) SupportedOffloads() (Offloads, error) {
	if p.VnetHdrSize() == 0 {
		return 0, nil
	}
	return OffloadAll, nil
}

// SetOffloads records o. A packet socket has no TUNSETOFFLOAD: it hands
// the guest GSO frames whenever the interface produces them (GRO), so a
// guest without GUEST_TSO needs GRO off on the interface (ethtool -K IF gro
// off). Without a virtio-net header no offload can be conveyed.
func (p *PacketSocket) SetOffloads(o Offloads) error {
	if o != 0 && p.VnetHdrSize() == 0 {
		return fmt.Errorf("packet socket on %s: offloads %v need a virtio-net header", p.iface, o)
	}
	p.mu.Lock()
	p.offloads = o
	p.mu.Unlock()
	return nil
}

func (p *PacketSocket) Offloads() Offloads {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offloads
}
