package vhostnet

import (
	"fmt"
	"sync"

	"github.com/netctl/netctl/virtio"
)

// Vring is one virtqueue's setup: size, start index, addresses, eventfds.
// The NIC does not own the eventfds. A zero EventFD leaves its
// notification unbound (not fd 0): with no Call eventfd vhost never
// signals and the driver polls the used ring.
type Vring struct {
	Num  uint32
	Base uint16
	Addr VringAddr
	Kick EventFD
	Call EventFD
	Err  EventFD
}

// Ring is a virtqueue as its driver lays it out (the guest side): for
// example a *guest.Queue. KickFD and CallFD return -1 for none.
type Ring interface {
	Num() uint16
	Addrs() (desc, avail, used uint64) // in this process
	KickFD() int
	CallFD() int
}

// VringOf describes r for vhost: its size, addresses and eventfds, base 0
// and no error eventfd.
func VringOf(r Ring) Vring {
	d, a, u := r.Addrs()
	return Vring{Num: uint32(r.Num()), Addr: VringAddr{Desc: d, Avail: a, Used: u},
		Kick: EventFDOf(r.KickFD()), Call: EventFDOf(r.CallFD())}
}

// NewQueuePair pairs an RX and a TX ring with a backend fd.
func NewQueuePair(rx, tx Ring, backend int) QueuePair {
	return QueuePair{RX: VringOf(rx), TX: VringOf(tx), Backend: backend}
}

// QueuePair is one queue pair of a NIC: its RX and TX rings and the backend
// fd (a tap or macvtap queue, or an AF_PACKET SOCK_RAW socket), which the
// NIC does not own.
type QueuePair struct {
	RX, TX  Vring
	Backend int
}

// NICConfig describes a multiqueue virtio-net data path: one vhost-net
// device per queue pair, all sharing the features and memory table.
// NewNIC copies it: changing the slices afterwards has no effect.
type NICConfig struct {
	// Features acknowledged to vhost-net: the ring and header bits the
	// guest acknowledged that vhost-net offers (VERSION_1, MRG_RXBUF,
	// EVENT_IDX, INDIRECT_DESC, LOG_ALL, ACCESS_PLATFORM), never the
	// offload bits, which the backend's offloads carry. Leave bit 27 out:
	// it is the guest's ANY_LAYOUT, but vhost-net reads it as
	// VHOST_NET_F_VIRTIO_NET_HDR (vhost adds and strips the header), which
	// suits only a backend without a header of its own; with a tap that
	// has IFF_VNET_HDR or a PACKET_VNET_HDR socket, NewNIC refuses it
	// with ErrInvalid. Without bit 27, a backend's own header must be as
	// long as vhost-net passes (12 bytes with VERSION_1 or MRG_RXBUF, else
	// 10), or NewNIC refuses it too.
	Features virtio.Features
	// Memory is the memory table: at least one region, at most the vhost
	// module's max_mem_regions, guest-physical ranges that do not overlap.
	Memory []MemoryRegion
	Queues []QueuePair
	// BusyLoopTimeout in µs for every ring (0: off).
	BusyLoopTimeout uint32
	// LogBase is the dirty log's address, needed with LOG_ALL.
	LogBase uint64
}

// clone returns a copy of c that shares no slice with it.
func (c NICConfig) clone() NICConfig {
	c.Memory = append([]MemoryRegion(nil), c.Memory...)
	c.Queues = append([]QueuePair(nil), c.Queues...)
	return c
}

// validate checks everything NewNIC can check before it touches the
// kernel: each error wraps ErrInvalid and names the valid range.
func (c NICConfig) validate() error {
	if len(c.Queues) == 0 {
		return fmt.Errorf("vhost-net: a NIC needs at least one queue pair: %w", ErrInvalid)
	}
	if c.Features.Has(virtio.LogAll) && c.LogBase == 0 {
		return fmt.Errorf("vhost-net: LOG_ALL needs a log base (NICConfig.LogBase): %w", ErrInvalid)
	}
	if len(c.Memory) == 0 {
		return fmt.Errorf("vhost-net: a NIC needs a memory table of at least one region: %w", ErrInvalid)
	}
	if err := validateMemTable(c.Memory, maxMemRegions()); err != nil {
		return err
	}
	for qp, q := range c.Queues {
		for vq, r := range []Vring{q.RX, q.TX} {
			if err := checkVringNum(uint32(vq), r.Num); err != nil {
				return fmt.Errorf("queue pair %d: %w", qp, err)
			}
			if err := checkVringAddr(uint32(vq), r.Addr); err != nil {
				return fmt.Errorf("queue pair %d: %w", qp, err)
			}
		}
		b, err := inspectBackend(q.Backend) // once: every check below reads b
		if err != nil {
			return fmt.Errorf("vhost-net: queue pair %d: %w", qp, err)
		}
		if err := checkHeaderOf(c.Features, b, q.Backend); err != nil {
			return fmt.Errorf("vhost-net: queue pair %d: %w", qp, err)
		}
		if err := checkHeaderSizeOf(c.Features, b, q.Backend); err != nil {
			return fmt.Errorf("vhost-net: queue pair %d: %w", qp, err)
		}
	}
	return nil
}

// NIC is a running multiqueue vhost-net data path. It owns its vhost-net
// fds. Safe for concurrent use.
type NIC struct {
	mu      sync.Mutex  // guards all below
	cfg     NICConfig   // a private copy
	devs    []*Device   // nil once closed
	bases   [][2]uint16 // per queue pair: RX, TX bases read at Stop
	running bool
	closed  bool
	// inject, set only by tests through newNIC, fails the named setup
	// step; nil in every NIC that NewNIC makes.
	inject func(step string) error
}

func (n *NIC) step(name string, f func() error) error {
	if n.inject != nil {
		if err := n.inject(name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// NewNIC opens one /dev/vhost-net per queue pair, sets owner, features,
// memory table and rings, and attaches the backends, so the data path runs
// when it returns. It first checks the whole config (ErrInvalid, nothing
// opened); if a kernel step then fails, everything done so far is undone
// (backends detached, fds closed) and the error names the step.
func NewNIC(cfg NICConfig) (*NIC, error) { return newNIC(cfg, nil) }

// newNIC is NewNIC with a failure-injection hook for tests.
func newNIC(cfg NICConfig, inject func(step string) error) (*NIC, error) {
	cfg = cfg.clone()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &NIC{cfg: cfg, inject: inject}
	ok := false
	defer func() {
		if !ok {
			n.closeLocked()
		}
	}()
	for qp := range cfg.Queues {
		var d *Device
		if err := n.step(fmt.Sprintf("queue pair %d: open", qp), func() (err error) { d, err = Open(); return err }); err != nil {
			return nil, err
		}
		n.devs = append(n.devs, d)
		if err := n.setup(qp, d); err != nil {
			return nil, err
		}
	}
	n.bases = make([][2]uint16, len(cfg.Queues))
	for qp, q := range cfg.Queues {
		n.bases[qp] = [2]uint16{q.RX.Base, q.TX.Base}
	}
	if err := n.attachLocked(false); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

func (n *NIC) setup(qp int, d *Device) error {
	c := n.cfg
	pfx := fmt.Sprintf("queue pair %d: ", qp)
	steps := []struct {
		name string
		f    func() error
	}{
		{"set owner", d.SetOwner},
		{"set features", func() error { return d.SetFeatures(c.Features) }},
		{"set memory table", func() error { return d.SetMemTable(c.Memory) }},
	}
	if c.LogBase != 0 {
		steps = append(steps, struct {
			name string
			f    func() error
		}{"set log base", func() error { return d.SetLogBase(c.LogBase) }})
	}
	for _, s := range steps {
		if err := n.step(pfx+s.name, s.f); err != nil {
			return err
		}
	}
	for vq, r := range []Vring{c.Queues[qp].RX, c.Queues[qp].TX} {
		idx := uint32(vq)
		vsteps := []struct {
			name string
			f    func() error
		}{
			{"set vring num", func() error { return d.SetVringNum(idx, r.Num) }},
			{"set vring base", func() error { return d.SetVringBase(idx, r.Base) }},
			{"set vring addr", func() error { return d.SetVringAddr(idx, r.Addr) }},
			{"set vring kick", func() error { return d.SetVringKick(idx, r.Kick.raw()) }},
			{"set vring call", func() error { return d.SetVringCall(idx, r.Call.raw()) }},
			{"set vring err", func() error { return d.SetVringErr(idx, r.Err.raw()) }},
		}
		if c.BusyLoopTimeout != 0 {
			vsteps = append(vsteps, struct {
				name string
				f    func() error
			}{"set busy-loop timeout", func() error { return d.SetBusyLoopTimeout(idx, c.BusyLoopTimeout) }})
		}
		for _, s := range vsteps {
			if err := n.step(fmt.Sprintf("%svq %d: %s", pfx, vq, s.name), s.f); err != nil {
				return err
			}
		}
	}
	return nil
}

// attachLocked attaches every backend, first setting the bases recorded
// at Stop when setBases.
func (n *NIC) attachLocked(setBases bool) error {
	for qp, d := range n.devs {
		for vq := uint32(0); vq < 2; vq++ {
			base := n.bases[qp][vq]
			if setBases {
				if err := n.step(fmt.Sprintf("queue pair %d: vq %d: set vring base", qp, vq), func() error { return d.SetVringBase(vq, base) }); err != nil {
					n.detachLocked()
					return err
				}
			}
			if err := n.step(fmt.Sprintf("queue pair %d: vq %d: attach backend", qp, vq), func() error { return d.SetBackend(vq, n.cfg.Queues[qp].Backend) }); err != nil {
				n.detachLocked()
				return err
			}
		}
	}
	n.running = true
	return nil
}

// detachLocked detaches every backend and records where each ring stopped.
func (n *NIC) detachLocked() error {
	var first error
	for qp, d := range n.devs {
		for vq := uint32(0); vq < 2; vq++ {
			if err := d.DetachBackend(vq); err != nil && first == nil {
				first = fmt.Errorf("queue pair %d: vq %d: detach: %w", qp, vq, err)
			}
			if n.bases != nil {
				if b, err := d.VringBase(vq); err == nil {
					n.bases[qp][vq] = b
				} else if first == nil {
					first = fmt.Errorf("queue pair %d: vq %d: get vring base: %w", qp, vq, err)
				}
			}
		}
	}
	n.running = false
	return first
}

// Stop detaches every backend (the kernel stops moving packets) and records
// each ring's position (VHOST_GET_VRING_BASE) for Start.
func (n *NIC) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return nil
	}
	return n.detachLocked()
}

// Start attaches the backends again, each ring resuming where Stop left it.
func (n *NIC) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return nil
	}
	if n.closed {
		return fmt.Errorf("vhost-net: Start: %w: the NIC was closed", ErrClosed)
	}
	if len(n.devs) == 0 {
		return fmt.Errorf("vhost-net: Start: %w: this NIC was not made by NewNIC", ErrInvalid)
	}
	return n.attachLocked(true)
}

// Bases returns, per queue pair, the RX and TX avail indexes recorded at the
// last Stop (or the configured ones before any Stop).
func (n *NIC) Bases() [][2]uint16 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][2]uint16(nil), n.bases...)
}

// Device returns queue pair qp's vhost-net device, still owned by the NIC.
// After Close it returns an error wrapping ErrClosed; for a queue pair the
// NIC does not have, one wrapping ErrInvalid.
func (n *NIC) Device(qp int) (*Device, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("vhost-net: queue pair %d: %w: the NIC was closed", qp, ErrClosed)
	}
	if qp < 0 || qp >= len(n.devs) {
		return nil, fmt.Errorf("vhost-net: queue pair %d: %w: this NIC has queue pairs 0 to %d", qp, ErrInvalid, len(n.devs)-1)
	}
	return n.devs[qp], nil
}

// Close stops the data path and closes every vhost-net fd. Closing twice is
// not an error.
func (n *NIC) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closeLocked()
}

func (n *NIC) closeLocked() error {
	var first error
	if n.running {
		first = n.detachLocked()
	}
	for _, d := range n.devs {
		if err := d.Close(); err != nil && first == nil {
			first = err
		}
	}
	n.devs = nil
	n.closed = true
	return first
}
