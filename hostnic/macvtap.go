package hostnic

import (
	"bytes"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/zerocopy"
)

// MacvtapSpec says what macvtap CreateMacvtap makes.
type MacvtapSpec struct {
	Name   string // the macvtap's name; "" lets netctl pick (MacvtapTemplate)
	Lower  string
	Mode   macvtap.Mode
	Queues int
	MTU    int
	MAC    net.HardwareAddr // the guest's MAC: macvtap delivers frames for it
}

type macvtapLink struct{ m *macvtap.Macvtap }

func (b *macvtapLink) Name() string      { return b.m.Name() }
func (b *macvtapLink) Ifindex() int      { return b.m.Ifindex() }
func (b *macvtapLink) Queues() int       { return b.m.Queues() }
func (b *macvtapLink) QueueFD(i int) int { return b.m.QueueFD(i) }
func (b *macvtapLink) Release() error    { return b.m.CloseQueues() }
func (b *macvtapLink) Destroy() error    { return b.m.Close() }

// CreateMacvtap is like `ip link add link LOWER name NAME type macvtap
// mode MODE` and opening its queues (macvtap.CreateMacvtap, which undoes
// itself on failure).
func (Real) CreateMacvtap(spec MacvtapSpec) (OpenLink, error) {
	name := spec.Name
	if name == "" {
		name = MacvtapTemplate
	}
	m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: name, Lower: spec.Lower, Mode: spec.Mode,
		MAC: spec.MAC, Queues: spec.Queues, MTU: spec.MTU})
	if err != nil {
		return nil, err
	}
	return &macvtapLink{m: m}, nil
}

func (Real) FindMacvtap(name, lower string, mac net.HardwareAddr) int {
	l, err := netlink.LinkByName(name)
	if err != nil || l.Type() != "macvtap" || !bytes.Equal(l.Attrs().HardwareAddr, mac) {
		return 0
	}
	lo, err := netlink.LinkByName(lower)
	if err != nil || lo.Attrs().Index != l.Attrs().ParentIndex {
		return 0
	}
	return l.Attrs().Index
}

// wanted are the lower device's features whose absence the guest feels,
// and what it loses.
var wanted = []struct{ feature, loss string }{
	{"tx-checksum-ip-generic", "checksum offload (the host checksums every frame)"},
	{"tx-scatter-gather", "scatter-gather (every frame is linearised)"},
	{"tx-tcp-segmentation", "TSO (large TCP sends are segmented in software)"},
	{"tx-generic-segmentation", "GSO"},
	{"rx-gro", "GRO on receive"},
}

func (Real) DirectNotes(lower string) ([]string, error) {
	f, err := macvtap.ReadFeatures(lower)
	if err != nil {
		return nil, fmt.Errorf("direct interface on %s: %w: name an existing lower device in <source dev>", lower, err)
	}
	var notes []string
	for _, w := range wanted {
		if on, known := f.Active[w.feature]; known && !on {
			notes = append(notes, fmt.Sprintf("direct on %s: %s is off, so the guest loses %s", lower, w.feature, w.loss))
		}
	}
	if e := zerocopy.Check(macvtap.KindMacvtap, f); !e.Eligible {
		notes = append(notes, fmt.Sprintf("direct on %s: no zero-copy TX: %s", lower, e.Reason))
	}
	return notes, nil
}
