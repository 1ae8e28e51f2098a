package stats

import "time"

// Rates are per-second rates between two samples of one NIC. A counter
// that went backwards (a reset: the NIC re-plugged, the tap re-created,
// QEMU restarted, a ring reset) has no rate for that interval: its Reset
// flag is set and the rate is 0, never a huge bogus number.
type Rates struct {
	Target  Target
	Seconds float64 // the interval; 0 when the samples are not in order (every rate is then 0)
	Link    *LinkRates
	Queues  []QueueRates
	Workers []WorkerRates
	VDPA    []VDPAQueueRates
}

// DirRates are one direction's per-second link rates.
type DirRates struct {
	Packets, Bytes, Errors, Drops float64
	Reset                         bool
}

// LinkRates are the link's rates, guest side (see LinkStats).
type LinkRates struct{ RX, TX DirRates }

// QueueRates are one virtqueue's descriptor rates.
type QueueRates struct {
	Pair               int
	Direction          string
	Offered, Completed float64 // descriptors per second
	Reset              bool
}

// WorkerRates is a vhost worker's CPU use: CPU seconds per second (1.0 =
// one CPU busy all the time).
type WorkerRates struct {
	Pair        int
	TID         int
	CPUFraction float64
	Reset       bool // another thread, or its time went backwards
}

// VDPAQueueRates are one vdpa queue's descriptor rates.
type VDPAQueueRates struct {
	Queue                       int
	Type                        string
	ReceivedDesc, CompletedDesc float64
	Reset                       bool
}

// Rate is pure: the per-second rates between two samples of one NIC
// (prev earlier than cur). Queues, workers and vdpa queues are matched by
// their identity (pair and direction; pair and thread id; queue index),
// so a queue present in only one sample has no rate. Counters here are
// already accumulated across 16-bit ring wraps (the Collector does that);
// a counter that went down is a reset.
//
// Each source's interval is between its own read times (LinkTime,
// RingsTime, WorkersTime, VDPATime; Time where a sample has none): the
// sources of one NIC are read at different moments (the link before any
// QMP work, the rings after it), and a slow first sample must not
// shrink one source's interval.
func Rate(prev, cur NICStats) Rates {
	r := Rates{Target: cur.Target}
	dt := interval(prev.Time, cur.Time, prev.Time, cur.Time)
	r.Seconds = dt.Seconds()
	if prev.Link != nil && cur.Link != nil {
		dt := interval(prev.LinkTime, cur.LinkTime, prev.Time, cur.Time)
		r.Link = &LinkRates{RX: dirRates(prev.Link.RX, cur.Link.RX, dt), TX: dirRates(prev.Link.TX, cur.Link.TX, dt)}
	}
	dt = interval(prev.RingsTime, cur.RingsTime, prev.Time, cur.Time)
	type qk struct {
		pair int
		dir  string
	}
	pq := map[qk]QueueStats{}
	for _, q := range prev.Queues {
		pq[qk{q.Pair, q.Direction}] = q
	}
	for _, q := range cur.Queues {
		p, ok := pq[qk{q.Pair, q.Direction}]
		if !ok {
			continue
		}
		off, r1 := perSecond(p.Offered, q.Offered, dt)
		comp, r2 := perSecond(p.Completed, q.Completed, dt)
		r.Queues = append(r.Queues, QueueRates{Pair: q.Pair, Direction: q.Direction, Offered: off, Completed: comp, Reset: r1 || r2})
	}
	dt = interval(prev.WorkersTime, cur.WorkersTime, prev.Time, cur.Time)
	pw := map[[2]int]WorkerStats{}
	for _, w := range prev.Workers {
		pw[[2]int{w.Pair, w.TID}] = w
	}
	for _, w := range cur.Workers {
		p, ok := pw[[2]int{w.Pair, w.TID}]
		if !ok {
			r.Workers = append(r.Workers, WorkerRates{Pair: w.Pair, TID: w.TID, Reset: true})
			continue
		}
		wr := WorkerRates{Pair: w.Pair, TID: w.TID}
		switch {
		case w.CPUSeconds < p.CPUSeconds:
			wr.Reset = true
		case dt > 0:
			wr.CPUFraction = (w.CPUSeconds - p.CPUSeconds) / dt.Seconds()
		}
		r.Workers = append(r.Workers, wr)
	}
	dt = interval(prev.VDPATime, cur.VDPATime, prev.Time, cur.Time)
	pv := map[int]VDPAQueueStats{}
	for _, v := range prev.VDPA {
		pv[v.Queue] = v
	}
	for _, v := range cur.VDPA {
		p, ok := pv[v.Queue]
		if !ok {
			continue
		}
		rec, r1 := perSecond(p.ReceivedDesc, v.ReceivedDesc, dt)
		comp, r2 := perSecond(p.CompletedDesc, v.CompletedDesc, dt)
		r.VDPA = append(r.VDPA, VDPAQueueRates{Queue: v.Queue, Type: v.Type, ReceivedDesc: rec, CompletedDesc: comp, Reset: r1 || r2})
	}
	return r
}

// interval is cur-prev of a source's own times, or of the samples'
// (fallbacks) when either has none; 0 when they are not in order.
func interval(prev, cur, prevFallback, curFallback time.Time) time.Duration {
	if prev.IsZero() || cur.IsZero() {
		prev, cur = prevFallback, curFallback
	}
	if prev.IsZero() || !cur.After(prev) {
		return 0
	}
	return cur.Sub(prev)
}

func dirRates(p, c Counters, dt time.Duration) DirRates {
	var d DirRates
	var r [4]bool
	d.Packets, r[0] = perSecond(p.Packets, c.Packets, dt)
	d.Bytes, r[1] = perSecond(p.Bytes, c.Bytes, dt)
	d.Errors, r[2] = perSecond(p.Errors, c.Errors, dt)
	d.Drops, r[3] = perSecond(p.Drops, c.Drops, dt)
	d.Reset = r[0] || r[1] || r[2] || r[3]
	return d
}

// perSecond is (cur-prev)/dt; a counter that went down is a reset (rate
// 0, reset true).
func perSecond(prev, cur uint64, dt time.Duration) (float64, bool) {
	if cur < prev {
		return 0, true
	}
	if dt <= 0 {
		return 0, false
	}
	return float64(cur-prev) / dt.Seconds(), false
}
