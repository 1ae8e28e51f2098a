package vhostuser

import (
	"errors"
	"fmt"

	"github.com/netctl/netctl/virtio"
)

// setTable gives every vhost-net device the table of rs; on a failure the
// devices already changed get the old table back.
func (s *session) setTable(rs regionList) error {
	for i, d := range s.b.devs {
		if err := d.SetMemTable(rs.kernel()); err != nil {
			for _, u := range s.b.devs[:i] {
				u.SetMemTable(s.regions.kernel())
			}
			return fmt.Errorf("queue pair %d: %w", i, err)
		}
	}
	return nil
}

// replaceTable makes rs the memory table: the rings whose addresses it
// does not hold must not be running (refused otherwise, nothing changed);
// every ring's addresses are translated again (the local addresses of a
// front-end address may have moved), and the old mappings not in rs are
// unmapped once vhost-net no longer refers to them.
func (s *session) replaceTable(rs regionList) error {
	wire := rs.wire()
	for q := range s.rings {
		r := &s.rings[q]
		if r.attached && r.addr != nil {
			if err := checkRingAddr(*r.addr, r.num, wire); err != nil {
				return fmt.Errorf("ring %d is running and the new memory table does not hold it: %w", q, err)
			}
		}
	}
	if s.logMap != nil {
		if err := checkLog(s.logDesc, wire); err != nil {
			return fmt.Errorf("the new memory table: %w: send SET_LOG_BASE with a larger log first", err)
		}
	}
	if err := s.setTable(rs); err != nil {
		return err
	}
	old := s.regions
	s.regions = rs
	var errs []error
	for q := range s.rings {
		if err := s.applyAddr(uint32(q)); err != nil {
			// A stopped ring whose memory went away: it starts again once
			// its addresses are valid.
			s.log.Info("vhost-user: ring addresses not in the new memory table", "ring", q, "err", err)
			errs = append(errs, s.detach(uint32(q)))
		}
	}
	for _, o := range old {
		if !rs.holds(o.m) {
			o.m.unmap()
		}
	}
	return errors.Join(append(errs, s.reconcileAll())...)
}

// holds reports whether m is one of rs's mappings.
func (rs regionList) holds(m *fileMap) bool {
	for _, r := range rs {
		if r.m == m {
			return true
		}
	}
	return false
}

func (s *session) setMemTable(regs []MemRegion, fds []int) error {
	if err := checkRegions(regs, min(s.b.maxSlots, MaxFDs)); err != nil {
		return err
	}
	rs, err := mapRegions(regs, fds)
	if err != nil {
		return err
	}
	if err := s.replaceTable(rs); err != nil {
		s.unmapUnheld(rs)
		return err
	}
	return nil
}

// unmapUnheld unmaps the mappings of rs that the current table does not
// hold. replaceTable can fail after vhost-net took the new table (a ring
// that does not attach): those mappings are then the devices' memory and
// stay until the table changes or the session ends.
func (s *session) unmapUnheld(rs regionList) {
	for _, r := range rs {
		if !s.regions.holds(r.m) {
			r.m.unmap()
		}
	}
}

func (s *session) addMemReg(r MemRegion, fd int) error {
	regs := append(s.regions.wire(), r)
	if err := checkRegions(regs, s.b.maxSlots); err != nil {
		return err
	}
	m, err := mapFile(fd, r.MmapOffset, r.Size, fmt.Sprintf("memory region (%v)", r))
	if err != nil {
		return err
	}
	rs := append(append(regionList(nil), s.regions...), region{MemRegion: r, m: m})
	if err := s.replaceTable(rs); err != nil {
		s.unmapUnheld(rs[len(rs)-1:])
		return err
	}
	return nil
}

// remMemReg removes the region with r's guest address, user address and
// size (the spec ignores the mmap offset here).
func (s *session) remMemReg(r MemRegion) error {
	for i, o := range s.regions {
		if o.GuestPhysAddr == r.GuestPhysAddr && o.UserAddr == r.UserAddr && o.Size == r.Size {
			rs := append(append(regionList(nil), s.regions[:i]...), s.regions[i+1:]...)
			return s.replaceTable(rs)
		}
	}
	return fmt.Errorf("REM_MEM_REG: no region %v in the table: %w", r, ErrInvalid)
}

// setLogBase maps the dirty log and gives its address to every device; on
// a failure the devices keep the old log.
func (s *session) setLogBase(l Log, fd int) error {
	if err := checkLog(l, s.regions.wire()); err != nil {
		return err
	}
	m, err := mapFile(fd, l.MmapOffset, l.MmapSize, "dirty log")
	if err != nil {
		return err
	}
	var oldAddr uint64
	if s.logMap != nil {
		oldAddr = s.logMap.local
	}
	for i, d := range s.b.devs {
		if err := d.SetLogBase(m.local); err != nil {
			for _, u := range s.b.devs[:i] {
				u.SetLogBase(oldAddr)
			}
			m.unmap()
			return fmt.Errorf("queue pair %d: %w", i, err)
		}
	}
	hadLog := s.logMap != nil
	s.logMap.unmap()
	s.logMap, s.logDesc = m, l
	var errs []error
	if !hadLog && s.acked.Has(virtio.LogAll) {
		// LOG_ALL waited for a log (kernelFeatures).
		for i, d := range s.b.devs {
			if err := d.SetFeatures(s.kernelFeatures(s.acked)); err != nil {
				errs = append(errs, fmt.Errorf("queue pair %d: LOG_ALL: %w", i, err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...) // the rings stay stopped: the connection ends
		}
	}
	// Rings whose used ring is logged waited for a log (applyAddr).
	for q := range s.rings {
		if r := &s.rings[q]; !r.applied && r.addr != nil && r.addr.Flags&VringAddrFlagLog != 0 {
			errs = append(errs, s.applyAddr(uint32(q)))
		}
	}
	return errors.Join(append(errs, s.reconcileAll())...)
}
