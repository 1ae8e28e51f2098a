package stats

import (
	"context"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// TestCollectReplugSamePlace: a NIC QEMU lists (no attach time in its
// key) is unplugged (device_del) and plugged again with the same id; the
// guest's driver puts the new device's rings on the pages the old one
// freed (same guest-physical addresses), its indices from 0. The
// collections in between saw "NIC gone"; no sampler ran (exporter
// --ring-sample 0, or it read nothing amiss). Before the fix the ring
// state of the gone device was kept as it was (and a sampler went on
// reading the freed pages), and the first collection after the replug counted
// from the old device's indices (1000, 990) to the new one's (5, 5): a
// jump of 64541 that never happened. A device that is gone has no rings:
// the next one counts from 0 (the counts carried over).
func TestCollectReplugSamePlace(t *testing.T) {
	ctx := context.Background()
	f := newFakeVM(t, 1, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	f.setIdx(0, 1000, 990)
	f.setIdx(1, 500, 500)
	base := c.Collect(ctx, []Target{tg})[0]
	if len(base.Queues) != 2 {
		t.Fatalf("queues %+v missing %v", base.Queues, base.Missing)
	}
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
	if s := c.Collect(ctx, []Target{tg})[0]; len(s.Queues) != 0 {
		t.Fatalf("NIC gone: queues %+v", s.Queues)
	}
	f.mu.Lock()
	f.gone = false
	f.mu.Unlock()
	f.setIdx(0, 5, 5)
	f.setIdx(1, 5, 5)
	s := c.Collect(ctx, []Target{tg})[0]
	want := [][2]uint64{{5, 5}, {5, 5}}
	if got := grew(base, s); !equal(got, want) {
		t.Errorf("after the replug: grew %v (missing %v), want %v (the new device's rings from 0)", got, s.Missing, want)
	}
}
