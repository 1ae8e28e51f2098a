package vhostuser

import (
	"fmt"
	"reflect"

	"github.com/netctl/netctl/virtio"
)

// Status is what the bridge is doing, for people and for --json-status.
type Status struct {
	Socket           string       `json:"socket"`
	Backend          string       `json:"backend"`
	QueuePairs       int          `json:"queue_pairs"`
	Profile          string       `json:"profile"`
	Connected        bool         `json:"connected"`
	FrontendPID      int          `json:"frontend_pid,omitempty"`
	Offered          string       `json:"offered_features"`
	OfferedNames     []string     `json:"offered_feature_names"`
	Features         string       `json:"features,omitempty"` // acknowledged by the front-end (SET_FEATURES)
	FeatureNames     []string     `json:"feature_names,omitempty"`
	VhostFeatures    string       `json:"vhost_features,omitempty"` // what vhost-net was given
	ProtocolFeatures string       `json:"protocol_features,omitempty"`
	MemoryRegions    int          `json:"memory_regions"`
	DirtyLog         bool         `json:"dirty_log"`
	Rings            []RingStatus `json:"rings,omitempty"`
	Sessions         int          `json:"sessions"` // front-ends served so far
	Refused          int          `json:"refused"`  // connections refused while one was served
	LastError        string       `json:"last_error,omitempty"`
}

// RingStatus is one ring as the front-end set it up.
type RingStatus struct {
	Index    int  `json:"index"`
	Num      int  `json:"num"`
	Enabled  bool `json:"enabled"`
	Started  bool `json:"started"`  // a kick eventfd came since the ring last stopped
	Attached bool `json:"attached"` // the tap queue is attached: vhost-net moves this ring's packets
}

func hex(f virtio.Features) string { return fmt.Sprintf("%#x", uint64(f)) }

// baseStatus is the status without a front-end.
func (b *Bridge) baseStatus() Status {
	return Status{Socket: b.cfg.Socket, Backend: fmt.Sprintf("%s %s", b.cfg.Backend.Kind(), b.cfg.Backend.Name()),
		QueuePairs: b.queues, Profile: b.cfg.Profile, Offered: hex(b.offered), OfferedNames: b.offered.Names()}
}

// Status returns a snapshot of the bridge's status.
func (b *Bridge) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.status
	st.Rings = append([]RingStatus(nil), st.Rings...)
	return st
}

// publishStatus keeps the counters and last error of the current status,
// takes the rest from st, and tells OnStatus if anything changed since
// it last did.
func (b *Bridge) publishStatus(st Status) {
	b.mu.Lock()
	st.Sessions, st.Refused, st.LastError = b.status.Sessions, b.status.Refused, b.status.LastError
	b.status = st
	changed := !reflect.DeepEqual(st, b.told)
	if changed && onlyCounters(st, b.told) {
		// A refusal changes only the last error, in words a front-end
		// chooses (each value refused differently): published at most
		// warnBurst times per warnWindow, the latest with the next.
		changed, _ = b.errPublish.allow()
	}
	if changed {
		b.told = st
	}
	b.mu.Unlock()
	if changed && b.cfg.OnStatus != nil {
		b.cfg.OnStatus(b.Status())
	}
}

// publish reports a session's state.
func (b *Bridge) publish(s *session) {
	st := b.baseStatus()
	st.Connected, st.FrontendPID = true, s.pid
	if s.featuresSet {
		st.Features, st.FeatureNames = hex(s.acked), s.acked.Names()
		st.VhostFeatures = vhostFeatures(s.acked, b.vhostOffered).String()
	}
	st.ProtocolFeatures = s.proto.String()
	st.MemoryRegions, st.DirtyLog = len(s.regions), s.logMap != nil
	for q := range s.rings {
		r := &s.rings[q]
		st.Rings = append(st.Rings, RingStatus{Index: q, Num: int(r.num), Enabled: s.enabled(uint32(q)),
			Started: r.started, Attached: r.attached})
	}
	b.publishStatus(st)
}

func (b *Bridge) connected(s *session) {
	b.mu.Lock()
	b.status.Sessions++
	b.mu.Unlock()
	b.publish(s)
}

func (b *Bridge) disconnected() { b.publishStatus(b.baseStatus()) }

func (b *Bridge) noteError(err error) {
	b.mu.Lock()
	b.status.LastError = err.Error()
	b.mu.Unlock()
}

// onlyCounters says whether a and b differ at most in their counters and
// last error.
func onlyCounters(a, b Status) bool {
	a.Sessions, a.Refused, a.LastError = 0, 0, ""
	b.Sessions, b.Refused, b.LastError = 0, 0, ""
	return reflect.DeepEqual(a, b)
}
