// What one queue shows must not change how another is counted: a
// per-queue reset (VIRTIO_F_RING_RESET: Linux's ethtool -G, an AF_XDP
// socket bound to a queue) or a step on one queue leaves the others'
// counts going on.

package stats

import (
	"context"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// TestQueueResetLeavesOtherQueues: the guest resets one queue (pair 0's
// rx: virtio 1.2 queue reset, which Linux uses for ethtool -G and for an
// AF_XDP socket on that queue; the device's status does not change) and
// sets it up again at the same place, while the other queues, past half
// the index range, go on moving 10 by 10. The sampler sees the reset
// queue's indices back at 0. Every other queue must grow by what it
// did (20), not by its whole raw index: before the fix the collection
// took the suspect read as a reset of every queue and counted theirs
// from 0 (20020 on queue 1; on the others, past half a turn, nothing and an uncounted step).
func TestQueueResetLeavesOtherQueues(t *testing.T) {
	ctx := context.Background()
	f := newFakeVM(t, 2, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	// Queue 1 below half the index range, 2 and 3 above it.
	at := []uint16{40000, 20000, 40000, 40000}
	for q := 0; q < 4; q++ {
		f.setIdx(q, at[q], at[q]-10)
	}
	base := c.Collect(ctx, []Target{tg})[0]
	for q := 1; q < 4; q++ {
		f.setIdx(q, at[q]+10, at[q])
	}
	f.setIdx(0, 0, 0) // queue 0 reset: its new ring, not filled yet
	c.Sample()
	for q := 1; q < 4; q++ {
		f.setIdx(q, at[q]+20, at[q]+10)
	}
	f.setIdx(0, 256, 3) // refilled, 3 packets in
	c.Sample()
	s := c.Collect(ctx, []Target{tg})[0]
	want := [][2]uint64{{256, 3}, {20, 20}, {20, 20}, {20, 20}}
	if got := grew(base, s); !equal(got, want) {
		t.Errorf("grew %v (missing %v), want %v: the reset queue from 0, the others what they did", got, s.Missing, want)
	}
	for _, q := range s.Queues {
		if q.Uncounted != 0 {
			t.Errorf("queue %d/%s uncounted %d: nothing was ambiguous", q.Pair, q.Direction, q.Uncounted)
		}
	}
}

// TestStepOnOneQueueLeavesOthers: one queue's indices step back (a
// reset of that queue whose new ring at the same place is in use
// already when the sampler next reads it) while the others go on 10 by
// 10. The stepping queue's read becomes its new base (one uncounted
// step); the others count all they did (20) and have no uncounted step.
// Before the fix every queue was rebased at the collection: the others
// lost what they did since the suspect read, and each showed an
// uncounted step that never happened.
func TestStepOnOneQueueLeavesOthers(t *testing.T) {
	ctx := context.Background()
	f := newFakeVM(t, 2, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	for q := 0; q < 4; q++ {
		f.setIdx(q, 40000, 39990)
	}
	f.setIdx(0, 10000, 9990)
	base := c.Collect(ctx, []Target{tg})[0]
	f.setIdx(0, 300, 44) // 55836 forward: more than half a turn
	for q := 1; q < 4; q++ {
		f.setIdx(q, 40010, 40000)
	}
	c.Sample()
	for q := 1; q < 4; q++ {
		f.setIdx(q, 40020, 40010)
	}
	c.Sample()
	s := c.Collect(ctx, []Target{tg})[0]
	want := [][2]uint64{{0, 0}, {20, 20}, {20, 20}, {20, 20}}
	if got := grew(base, s); !equal(got, want) {
		t.Errorf("grew %v (missing %v), want %v", got, s.Missing, want)
	}
	for i, q := range s.Queues {
		if w := map[bool]uint64{true: 1, false: 0}[i == 0]; q.Uncounted != w {
			t.Errorf("queue %d/%s uncounted %d, want %d", q.Pair, q.Direction, q.Uncounted, w)
		}
	}
}

// TestQueueResetLeavesOthersResolved: as TestQueueResetLeavesOtherQueues,
// where each collection resolves the rings again (a vhost-user NIC whose
// vhost is stopped: its first pair cannot be asked for, so only pair 1
// is counted, and every collection finds its addresses afresh and
// carries the counts over). Pair 1's rx is reset; its tx, at 20000,
// must grow by the 20 it did. Before the fix the carry-over took the
// suspect read as a reset of every queue: tx counted 20020.
func TestQueueResetLeavesOthersResolved(t *testing.T) {
	ctx := context.Background()
	f := newFakeVM(t, 2, false)
	f.mu.Lock()
	f.vhostUser = true
	f.mu.Unlock()
	tg := fakeTarget(f, BackendVhostUser)
	tg.NetdevType = "vhost-user"
	c := NewCollector(Options{Deadline: 10 * time.Second})
	f.setIdx(2, 40000, 39990)
	f.setIdx(3, 20000, 19990)
	base := c.Collect(ctx, []Target{tg})[0]
	if len(base.Queues) != 2 {
		t.Fatalf("queues %+v missing %v: want pair 1's two", base.Queues, base.Missing)
	}
	f.setIdx(3, 20010, 20000)
	f.setIdx(2, 0, 0) // reset alone
	c.Sample()
	f.setIdx(3, 20020, 20010)
	f.setIdx(2, 256, 3)
	c.Sample()
	s := c.Collect(ctx, []Target{tg})[0]
	want := [][2]uint64{{256, 3}, {20, 20}}
	if got := grew(base, s); !equal(got, want) {
		t.Errorf("grew %v (missing %v), want %v", got, s.Missing, want)
	}
}
