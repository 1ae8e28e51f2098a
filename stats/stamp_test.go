package stats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// TestRatePerSourceTime: each source's rate is over its own read times.
// The link is read before any QMP work and the rings after it; a first
// sample whose QMP work was slow (the rings resolved) must not shrink the
// link's interval: 1000 packets over the link's 2 s are 500/s, not the
// 1000/s that the NICs' overall times (1 s apart) would make of them.
func TestRatePerSourceTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := NICStats{Time: t0.Add(1500 * time.Millisecond), LinkTime: t0, RingsTime: t0.Add(1500 * time.Millisecond),
		Link:   &LinkStats{RX: Counters{Packets: 0}},
		Queues: []QueueStats{{Pair: 0, Direction: "rx", Completed: 0}}}
	cur := NICStats{Time: t0.Add(2500 * time.Millisecond), LinkTime: t0.Add(2 * time.Second), RingsTime: t0.Add(2500 * time.Millisecond),
		Link:   &LinkStats{RX: Counters{Packets: 1000}},
		Queues: []QueueStats{{Pair: 0, Direction: "rx", Completed: 1000}}}
	r := Rate(prev, cur)
	if r.Link == nil || r.Link.RX.Packets != 500 {
		t.Errorf("link rx %+v, want 500/s over the link's own 2 s", r.Link)
	}
	if len(r.Queues) != 1 || r.Queues[0].Completed != 1000 {
		t.Errorf("queues %+v, want 1000/s over the rings' own 1 s", r.Queues)
	}
}

// TestCollectStampsSources: Collect stamps each source when it reads it:
// the link before the QMP work, the rings at their read, the NIC's Time
// when all is done.
func TestCollectStampsSources(t *testing.T) {
	f := newFakeVM(t, 1, false)
	var mu sync.Mutex
	clock := time.Unix(5000, 0)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	tg := fakeTarget(f, policy.BackendUserspace)
	tg.Link = "lo"
	s := NewCollector(Options{Now: now}).Collect(context.Background(), []Target{tg})[0]
	if s.Link == nil || len(s.Queues) == 0 {
		t.Fatalf("link %v queues %v missing %v", s.Link, s.Queues, s.Missing)
	}
	if s.LinkTime.IsZero() || !s.LinkTime.Before(s.RingsTime) || s.Time.Before(s.RingsTime) {
		t.Errorf("link at %v, rings at %v, sample at %v: want link < rings <= sample", s.LinkTime, s.RingsTime, s.Time)
	}
}
