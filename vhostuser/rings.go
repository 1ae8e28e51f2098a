package vhostuser

import (
	"errors"
	"fmt"

	"github.com/netctl/netctl/vhostnet"
)

// ring is what the bridge knows of one front-end ring. Ring q is vring
// q%2 (0 RX, 1 TX) of vhost-net device q/2.
type ring struct {
	num      uint32     // 0 until SET_VRING_NUM
	addr     *VringAddr // the front-end's, as sent; nil until SET_VRING_ADDR
	applied  bool       // addr translated and given to vhost-net for the current memory table
	started  bool       // a kick eventfd came since the ring last stopped (GET_VRING_BASE)
	enable   int8       // -1 until SET_VRING_ENABLE, then 0 or 1
	attached bool       // the tap queue is vhost-net's backend for this ring
	busyPoll bool       // the busy-poll timeout was set
}

func (s *session) dev(q uint32) (Vhost, uint32) { return s.b.devs[q/2], q % 2 }

// enabled says whether ring q may run: as SET_VRING_ENABLE said, or, before
// any, enabled unless bit 30 (PROTOCOL_FEATURES) was acknowledged, when
// rings start disabled.
func (s *session) enabled(q uint32) bool {
	r := &s.rings[q]
	if r.enable >= 0 {
		return r.enable == 1
	}
	return !s.featuresSet || uint64(s.acked)&FeatureProtocolFeatures == 0
}

// reconcile attaches ring q's tap queue when the ring can run (features,
// memory, size, addresses, a kick, enabled) and detaches it when it
// cannot. "Disabled" in vhost-net is a ring without a backend
// (VHOST_NET_SET_BACKEND -1): it has no started-but-dropping state.
func (s *session) reconcile(q uint32) error {
	r := &s.rings[q]
	want := s.featuresSet && len(s.regions) > 0 && r.num != 0 && r.applied && r.started && s.enabled(q) && !s.waitsForLog()
	if want == r.attached {
		return nil
	}
	d, idx := s.dev(q)
	if !want {
		return s.detach(q)
	}
	if us := s.b.busyPollUS; us != 0 && !r.busyPoll {
		if err := d.SetBusyLoopTimeout(idx, us); err != nil && !errors.Is(err, vhostnet.ErrNotSupported) {
			return fmt.Errorf("ring %d: %w", q, err)
		}
		r.busyPoll = true
	}
	if err := d.SetBackend(idx, s.b.cfg.Backend.QueueFD(int(q/2))); err != nil {
		return fmt.Errorf("ring %d: attach the tap queue: %w", q, err)
	}
	r.attached = true
	return nil
}

// reconcileAll reconciles every ring and returns the first error.
func (s *session) reconcileAll() error {
	var first error
	for q := range s.rings {
		if err := s.reconcile(uint32(q)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// detach takes ring q's backend away, if it has one.
func (s *session) detach(q uint32) error {
	r := &s.rings[q]
	if !r.attached {
		return nil
	}
	d, idx := s.dev(q)
	if err := d.SetBackend(idx, -1); err != nil {
		return fmt.Errorf("ring %d: detach the tap queue: %w", q, err)
	}
	r.attached = false
	return nil
}

// applyAddr gives vhost-net ring q's addresses translated through the
// current memory table, when the ring has a size, addresses and the table
// holds them. A ring whose addresses the table does not hold is left
// unapplied (it cannot start) and the error says why; a ring whose used
// ring is logged stays unapplied, without an error, until a log is mapped.
func (s *session) applyAddr(q uint32) error {
	r := &s.rings[q]
	r.applied = false
	if r.addr == nil || r.num == 0 || len(s.regions) == 0 {
		return nil
	}
	a := *r.addr
	if err := checkRingAddr(a, r.num, s.regions.wire()); err != nil {
		return err
	}
	if a.Flags&VringAddrFlagLog != 0 && s.logMap == nil {
		// vhost-net would log the used ring at log_base (0 here) +
		// gpa/32768, anywhere in this process. QEMU sends the flag
		// before SET_LOG_BASE when it starts a device during migration:
		// the ring waits for the log (setLogBase applies it again).
		s.log.Info("vhost-user: ring waits for SET_LOG_BASE: its used ring is logged", "ring", q)
		return nil
	}
	desc, ok1 := s.regions.translate(a.Desc)
	avail, ok2 := s.regions.translate(a.Avail)
	used, ok3 := s.regions.translate(a.Used)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("ring %d: addresses outside the front-end's memory: %w", q, ErrInvalid)
	}
	d, idx := s.dev(q)
	va := vhostnet.VringAddr{Desc: desc, Avail: avail, Used: used}
	if a.Flags&VringAddrFlagLog != 0 {
		va.Log, va.LogUsed = a.Log, true // guest-physical: vhost logs by GPA
	}
	if err := d.SetVringAddr(idx, va); err != nil {
		return fmt.Errorf("ring %d: %w", q, err)
	}
	r.applied = true
	return nil
}
