package vhostuser

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

// session is one front-end's connection. It is used by one goroutine (the
// connection's), which owns every field; Status snapshots go out through
// the Bridge.
type session struct {
	b    *Bridge
	conn *net.UnixConn
	log  *slog.Logger
	pid  int

	acked       virtio.Features  // SET_FEATURES
	featuresSet bool             // SET_FEATURES came
	proto       ProtocolFeatures // SET_PROTOCOL_FEATURES
	hdrSize     int              // the tap's virtio-net header size as set
	regions     regionList       // mapped guest memory, in table order
	logMap      *fileMap         // the dirty log, when SET_LOG_BASE came
	logDesc     Log
	rings       []ring
	owned       bool // start set this process as every device's owner; stop not yet reset them
	// The handshake (see DefaultHandshakeTimeout): what the front-end
	// has asked for so far.
	gotFeatures, askedProto, setProto bool
}

func newSession(b *Bridge, conn *net.UnixConn, pid int) *session {
	s := &session{b: b, conn: conn, pid: pid, log: b.log.With("frontend_pid", pid)}
	s.resetState()
	return s
}

func (s *session) resetState() {
	s.acked, s.featuresSet, s.proto = 0, false, 0
	s.rings = make([]ring, 2*s.b.queues)
	for i := range s.rings {
		s.rings[i].enable = -1
	}
}

// start makes this process the owner of every vhost-net device again
// (VHOST_SET_OWNER); on failure it resets the ones it set.
func (s *session) start() error {
	for i, d := range s.b.devs {
		if err := d.SetOwner(); err != nil {
			for _, u := range s.b.devs[:i] {
				u.ResetOwner()
			}
			return fmt.Errorf("queue pair %d: %w", i, err)
		}
	}
	s.owned = true
	hdr, err := s.b.cfg.Backend.VnetHdrSize()
	if err != nil {
		s.stop()
		return err
	}
	s.hdrSize = hdr
	return nil
}

// stop releases everything the front-end gave: each ring is detached,
// each device reset (VHOST_RESET_OWNER drops the memory table, the
// eventfds, the log and the worker), and the memory and log unmapped.
// The devices stay open for the next front-end.
func (s *session) stop() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for q := range s.rings {
		keep(s.detach(uint32(q)))
	}
	// Only devices this session owns: after a RESET_OWNER whose new
	// SET_OWNER failed there is none, and VHOST_RESET_OWNER of a device
	// without an owner is EPERM, which would stop the bridge.
	for i, d := range s.b.devs {
		if s.owned {
			if err := d.ResetOwner(); err != nil {
				keep(fmt.Errorf("queue pair %d: reset owner: %w", i, err))
			}
		}
	}
	s.owned = false
	s.regions.unmapAll()
	s.regions = nil
	keep(s.logMap.unmap())
	s.logMap = nil
	s.resetState()
	return first
}

// replyRequired are the requests whose reply the spec makes mandatory
// (a NEED_REPLY on them asks for nothing more).
func (s *session) replyRequired(r Request) bool {
	switch r {
	case GetFeatures, GetProtocolFeatures, GetVringBase, GetQueueNum, GetMaxMemSlots, GetConfig, GetInflightFD, GetStatus:
		return true
	case SetLogBase:
		return s.proto.Has(ProtocolLogShmFD)
	}
	return false
}

// serve reads and answers messages until the front-end goes away or
// breaks the protocol. The returned error says why the connection ended
// (nil for a clean close).
func (s *session) serve() error {
	// The handshake's deadline counts from the connection: a front-end
	// that keeps sending other requests without finishing it holds the
	// bridge as surely as a silent one.
	deadline, by, msgs := false, time.Now().Add(s.b.handshake), 0
	for {
		if d := s.b.handshake; d > 0 && !s.handshakeDone() {
			if !deadline {
				s.conn.SetReadDeadline(by)
			}
			deadline = true
		} else if deadline {
			s.conn.SetReadDeadline(time.Time{})
			deadline = false
		}
		m, err := ReadMessage(s.conn)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return &idleError{pid: s.pid, after: s.b.handshake, step: s.handshakeStep(), msgs: msgs}
			}
			return err
		}
		msgs++
		if err := s.one(m); err != nil {
			return err
		}
	}
}

// one handles one message. A malformed message ends the connection; a
// refused one gets a failure REPLY_ACK when the front-end asked for one,
// and otherwise ends the connection too, since the front-end would not
// learn that its setup is incomplete.
func (s *session) one(m *Message) error {
	defer m.CloseFDs()
	if s.b.trace != nil {
		s.b.trace(m)
	}
	body, err := Decode(m)
	if err != nil {
		return err
	}
	reply, herr := s.handle(m, body)
	// After handling: a SET_PROTOCOL_FEATURES that negotiates REPLY_ACK
	// with NEED_REPLY set is answered (rust-vmm's front-end then waits).
	ack := m.Flags&FlagNeedReply != 0 && s.proto.Has(ProtocolReplyAck) && !s.replyRequired(m.Request)
	if herr != nil {
		s.b.noteError(herr)
	}
	s.b.publish(s) // before the reply: a front-end that has its answer sees the new status
	if herr != nil {
		s.b.refusedReqs.warn(s.log, "vhost-user: request refused", "request", m.Request.String(), "err", herr)
		if ack {
			return WriteMessage(s.conn, NewReply(m.Request, U64(1)))
		}
		return fmt.Errorf("%v refused: %w", m.Request, herr)
	}
	switch {
	case s.replyRequired(m.Request):
		if reply == nil {
			reply = U64(0)
		}
		return WriteMessage(s.conn, NewReply(m.Request, reply))
	case ack:
		return WriteMessage(s.conn, NewReply(m.Request, U64(0)))
	}
	return nil
}

// handshakeDone says whether the front-end has read the features and,
// if it asked for the protocol features, set them.
func (s *session) handshakeDone() bool {
	return s.gotFeatures && (!s.askedProto || s.setProto)
}

// handshakeStep says, for the log, how far the handshake got.
func (s *session) handshakeStep() string {
	switch {
	case s.askedProto:
		return "after GET_PROTOCOL_FEATURES, without SET_PROTOCOL_FEATURES"
	case s.gotFeatures:
		return "after GET_FEATURES"
	}
	return "since it connected (no GET_FEATURES)"
}

func (s *session) ringIndex(idx uint32) (uint32, error) {
	return idx, checkRingIndex(idx, s.b.queues)
}

// handle carries out one decoded request. The message's fds are closed by
// the caller afterwards: vhost-net takes its own reference to each eventfd
// and a mapping keeps its file.
func (s *session) handle(m *Message, body Body) (Body, error) {
	fd0 := -1
	if len(m.FDs) > 0 {
		fd0 = m.FDs[0]
	}
	switch m.Request {
	case GetFeatures:
		s.gotFeatures = true
		return U64(s.b.offered), nil
	case SetFeatures:
		return nil, s.setFeatures(virtio.Features(body.(U64)))
	case GetProtocolFeatures:
		s.askedProto = true
		return U64(s.b.protoOffered), nil
	case SetProtocolFeatures:
		p := ProtocolFeatures(body.(U64))
		if extra := p &^ s.b.protoOffered; extra != 0 {
			return nil, fmt.Errorf("protocol features %v were not offered (offered %v): %w", extra, s.b.protoOffered, ErrInvalid)
		}
		s.proto, s.setProto = p, true
		return nil, nil
	case GetQueueNum:
		// Virtqueues, as libvhost-user, passt and Cloud Hypervisor count
		// them; QEMU reads it as a bound on queue pairs, which 2N also
		// satisfies (a ring index past 2N is refused).
		return U64(2 * s.b.queues), nil
	case GetMaxMemSlots:
		return U64(s.b.maxSlots), nil
	case SetOwner:
		return nil, nil // the session became the owner when it began
	case ResetOwner:
		// Deprecated, but a front-end may send it: everything is
		// released as at a disconnect; the protocol features stay.
		proto := s.proto
		if err := s.stop(); err != nil {
			return nil, err
		}
		s.proto = proto
		return nil, s.start()
	case SetMemTable:
		return nil, s.setMemTable(body.(MemoryTable).Regions, m.FDs)
	case AddMemReg:
		if !s.proto.Has(ProtocolConfigureMemSlots) {
			return nil, fmt.Errorf("ADD_MEM_REG needs CONFIGURE_MEM_SLOTS, which was not negotiated: %w", ErrInvalid)
		}
		return nil, s.addMemReg(body.(SingleMemRegion).Region, fd0)
	case RemMemReg:
		if !s.proto.Has(ProtocolConfigureMemSlots) {
			return nil, fmt.Errorf("REM_MEM_REG needs CONFIGURE_MEM_SLOTS, which was not negotiated: %w", ErrInvalid)
		}
		return nil, s.remMemReg(body.(SingleMemRegion).Region)
	case SetLogBase:
		if !s.proto.Has(ProtocolLogShmFD) {
			return nil, fmt.Errorf("SET_LOG_BASE needs LOG_SHMFD, which was not negotiated: %w", ErrInvalid)
		}
		return U64(0), s.setLogBase(body.(Log), fd0)
	case SetLogFD:
		for i, d := range s.b.devs {
			if err := d.SetLogFD(fd0); err != nil {
				return nil, fmt.Errorf("queue pair %d: %w", i, err)
			}
		}
		return nil, nil
	case SetVringNum:
		st := body.(VringState)
		q, err := s.ringIndex(st.Index)
		if err != nil {
			return nil, err
		}
		if err := checkRingNum(q, st.Num); err != nil {
			return nil, err
		}
		// The ring's addresses must hold the new size before vhost-net
		// hears of it: a refused request leaves the kernel and the ring
		// (running or not) as they were.
		if a := s.rings[q].addr; a != nil && len(s.regions) > 0 {
			if err := checkRingAddr(*a, st.Num, s.regions.wire()); err != nil {
				return nil, err
			}
		}
		if err := s.detach(q); err != nil {
			return nil, err
		}
		d, idx := s.dev(q)
		if err := d.SetVringNum(idx, st.Num); err != nil {
			return nil, fmt.Errorf("ring %d: %w", q, err)
		}
		s.rings[q].num = st.Num
		aerr := s.applyAddr(q)
		return nil, errors.Join(aerr, s.reconcile(q))
	case SetVringBase:
		st := body.(VringState)
		q, err := s.ringIndex(st.Index)
		if err != nil {
			return nil, err
		}
		if err := checkRingBase(q, st.Num); err != nil {
			return nil, err
		}
		if err := s.detach(q); err != nil {
			return nil, err
		}
		d, idx := s.dev(q)
		if err := d.SetVringBase(idx, uint16(st.Num)); err != nil {
			return nil, fmt.Errorf("ring %d: %w", q, err)
		}
		return nil, s.reconcile(q)
	case SetVringAddr:
		a := body.(VringAddr)
		q, err := s.ringIndex(a.Index)
		if err != nil {
			return nil, err
		}
		r := &s.rings[q]
		if r.num != 0 && len(s.regions) > 0 {
			if err := checkRingAddr(a, r.num, s.regions.wire()); err != nil {
				return nil, err
			}
		}
		old := r.addr
		r.addr = &a
		if err := s.applyAddr(q); err != nil {
			r.addr = old
			s.applyAddr(q)
			return nil, err
		}
		return nil, s.reconcile(q)
	case GetVringBase:
		st := body.(VringState)
		q, err := s.ringIndex(st.Index)
		if err != nil {
			return nil, err
		}
		// Stop the ring first: vhost-net then holds no buffer, and the
		// base read is where the front-end resumes.
		if err := s.detach(q); err != nil {
			return nil, err
		}
		s.rings[q].started = false
		d, idx := s.dev(q)
		base, err := d.VringBase(idx)
		if err != nil {
			return nil, fmt.Errorf("ring %d: %w", q, err)
		}
		return VringState{Index: q, Num: uint32(base)}, nil
	case SetVringKick, SetVringCall, SetVringErr:
		f := body.(RingFile)
		q, err := s.ringIndex(f.Index)
		if err != nil {
			return nil, err
		}
		d, idx := s.dev(q)
		switch m.Request {
		case SetVringKick:
			if f.NoFD {
				return nil, fmt.Errorf("ring %d: a kick without an eventfd (polling) is something vhost-net cannot do: "+
					"send an eventfd: %w", q, ErrNotSupported)
			}
			if err := d.SetVringKick(idx, fd0); err != nil {
				return nil, fmt.Errorf("ring %d: %w", q, err)
			}
			s.rings[q].started = true
			return nil, s.reconcile(q)
		case SetVringCall:
			if err := d.SetVringCall(idx, fd0); err != nil {
				return nil, fmt.Errorf("ring %d: %w", q, err)
			}
		default:
			if err := d.SetVringErr(idx, fd0); err != nil {
				return nil, fmt.Errorf("ring %d: %w", q, err)
			}
		}
		return nil, nil
	case SendRARP:
		if !s.proto.Has(ProtocolRARP) {
			return nil, fmt.Errorf("SEND_RARP needs RARP, which was not negotiated: %w", ErrInvalid)
		}
		return nil, s.sendRARP(uint64(body.(U64)))
	case SetVringEnable:
		st := body.(VringState)
		q, err := s.ringIndex(st.Index)
		if err != nil {
			return nil, err
		}
		if st.Num > 1 {
			return nil, fmt.Errorf("ring %d: enable %d: %w: use 0 or 1", q, st.Num, ErrInvalid)
		}
		s.rings[q].enable = int8(st.Num)
		return nil, s.reconcile(q)
	}
	return nil, fmt.Errorf("%v is not implemented by the vhost-net bridge (and its feature was not offered): %w", m.Request, ErrNotSupported)
}

// setFeatures acknowledges the front-end's features: the tap's header
// size and offloads follow the guest's bits (macvtap.ApplyGuestFeatures),
// vhost-net gets the ring bits (LOG_ALL only once a log is mapped). A header size change happens with every
// ring detached. On failure the devices keep the features they had.
func (s *session) setFeatures(f virtio.Features) error {
	if extra := f &^ s.b.offered; extra != 0 {
		return fmt.Errorf("features %v were not offered (offered %v): %w", extra, s.b.offered, ErrInvalid)
	}
	if hdr := macvtap.VnetHdrSizeFor(f); hdr != s.hdrSize {
		for q := range s.rings {
			if err := s.detach(uint32(q)); err != nil {
				return errors.Join(err, s.reconcileAll())
			}
		}
	}
	if _, err := macvtap.ApplyGuestFeatures(s.b.cfg.Backend, f); err != nil {
		return errors.Join(fmt.Errorf("tap: %w", err), s.reconcileAll())
	}
	vf := s.kernelFeatures(f)
	old := s.kernelFeatures(s.acked)
	for i, d := range s.b.devs {
		if err := d.SetFeatures(vf); err != nil {
			for _, u := range s.b.devs[:i] {
				u.SetFeatures(old)
			}
			macvtap.ApplyGuestFeatures(s.b.cfg.Backend, s.acked)
			return errors.Join(fmt.Errorf("queue pair %d: %w", i, err), s.reconcileAll())
		}
	}
	s.acked, s.featuresSet = f, true
	s.hdrSize = macvtap.VnetHdrSizeFor(f)
	return s.reconcileAll()
}

// kernelFeatures are the bits vhost-net gets for the acknowledged f:
// LOG_ALL only once a dirty log is mapped. With LOG_ALL and no log,
// vhost-net would log every write at log_base (0) + gpa/32768, anywhere in
// this process; QEMU's vhost_dev_start sends LOG_ALL before SET_LOG_BASE
// when it starts a device during migration, so the bit waits for the log
// (setLogBase) and, meanwhile, no ring runs (waitsForLog).
func (s *session) kernelFeatures(f virtio.Features) virtio.Features {
	vf := vhostFeatures(f, s.b.vhostOffered)
	if s.logMap == nil {
		vf &^= virtio.LogAll
	}
	return vf
}

// waitsForLog reports whether LOG_ALL was acknowledged without a log: no
// ring may run unlogged while the front-end migrates.
func (s *session) waitsForLog() bool { return s.acked.Has(virtio.LogAll) && s.logMap == nil }
