package stats

import (
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := NICStats{
		Time: t0,
		Link: &LinkStats{RX: Counters{Packets: 100, Bytes: 10000}, TX: Counters{Packets: 50, Bytes: 5000, Drops: 3}},
		Queues: []QueueStats{
			{Pair: 0, Direction: "rx", Offered: 65530, Completed: 65500},
			{Pair: 0, Direction: "tx", Offered: 10, Completed: 10},
			{Pair: 1, Direction: "rx", Offered: 500, Completed: 500},
		},
		Workers: []WorkerStats{{Pair: 0, TID: 7, CPUSeconds: 1.5}, {Pair: 1, TID: 8, CPUSeconds: 2}},
		VDPA:    []VDPAQueueStats{{Queue: 0, Type: "rx", ReceivedDesc: 10, CompletedDesc: 9}},
	}
	cur := NICStats{
		Time: t0.Add(2 * time.Second),
		Link: &LinkStats{RX: Counters{Packets: 300, Bytes: 30000}, TX: Counters{Packets: 40, Bytes: 6000, Drops: 3}},
		Queues: []QueueStats{
			// accumulated past the 16-bit wrap: the collector already did the mod 65536
			{Pair: 0, Direction: "rx", Offered: 65530 + 20, Completed: 65500 + 40},
			{Pair: 0, Direction: "tx", Offered: 4, Completed: 4}, // a ring reset
			{Pair: 2, Direction: "rx", Offered: 1, Completed: 1}, // not in prev
		},
		Workers: []WorkerStats{{Pair: 0, TID: 7, CPUSeconds: 2.5}, {Pair: 1, TID: 9, CPUSeconds: 0.1}},
		VDPA:    []VDPAQueueStats{{Queue: 0, Type: "rx", ReceivedDesc: 30, CompletedDesc: 29}},
	}
	r := Rate(prev, cur)
	if r.Seconds != 2 {
		t.Fatalf("Seconds = %v, want 2", r.Seconds)
	}
	if r.Link == nil || r.Link.RX.Packets != 100 || r.Link.RX.Bytes != 10000 || r.Link.RX.Reset {
		t.Errorf("link rx = %+v, want 100 pkt/s, 10000 B/s", r.Link)
	}
	// TX packets went down (a tap re-created): a reset, rate 0.
	if !r.Link.TX.Reset || r.Link.TX.Packets != 0 || r.Link.TX.Bytes != 500 {
		t.Errorf("link tx = %+v, want a reset with 0 pkt/s and 500 B/s", r.Link.TX)
	}
	if len(r.Queues) != 2 {
		t.Fatalf("queues = %+v, want the 2 that are in both samples", r.Queues)
	}
	if q := r.Queues[0]; q.Offered != 10 || q.Completed != 20 || q.Reset {
		t.Errorf("queue 0 rx = %+v, want 10 and 20 per second", q)
	}
	if q := r.Queues[1]; !q.Reset || q.Offered != 0 {
		t.Errorf("queue 0 tx = %+v, want a reset", q)
	}
	if len(r.Workers) != 2 || r.Workers[0].CPUFraction != 0.5 || !r.Workers[1].Reset {
		t.Errorf("workers = %+v, want 0.5 CPU for tid 7 and a reset for the new tid 9", r.Workers)
	}
	if len(r.VDPA) != 1 || r.VDPA[0].ReceivedDesc != 10 || r.VDPA[0].CompletedDesc != 10 {
		t.Errorf("vdpa = %+v, want 10/s each", r.VDPA)
	}
}

func TestRateNoInterval(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NICStats{Time: t0, Link: &LinkStats{RX: Counters{Packets: 5}}, Queues: []QueueStats{{Direction: "rx", Offered: 3}}}
	for _, prev := range []NICStats{{}, s} {
		r := Rate(prev, s)
		if r.Seconds != 0 || (r.Link != nil && r.Link.RX.Packets != 0) {
			t.Errorf("Rate(%v, same) = %+v, want no rates", prev.Time, r)
		}
		for _, q := range r.Queues {
			if q.Offered != 0 {
				t.Errorf("queue rate %+v with no interval", q)
			}
		}
	}
	// Samples out of order: no rates, no panic.
	later := s
	later.Time = t0.Add(time.Second)
	if r := Rate(later, s); r.Seconds != 0 {
		t.Errorf("reversed samples: Seconds = %v", r.Seconds)
	}
}
