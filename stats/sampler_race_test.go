package stats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// TestSamplerRacesCollect: the sampler reading every millisecond while
// collections, Forget and the guest's traffic (wrapping the 16-bit
// indices) run side by side: no data race (go test -race), and the
// counts a collection returns never go down while the ring state is
// kept, and end at exactly what the guest did.
func TestSamplerRacesCollect(t *testing.T) {
	f := newFakeVM(t, 1, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := c.Collect(ctx, []Target{tg})[0]
	if len(base.Queues) != 2 {
		t.Fatalf("queues %+v missing %v", base.Queues, base.Missing)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.SampleEvery(ctx, time.Millisecond)
	}()
	// 400,000 descriptors (six wraps), at most 100 every 200 µs: the
	// sampler would have to stall over 65 ms (half a turn at that pace)
	// for a read gap it cannot explain, which the -race run on a loaded
	// 2-core machine did at 1000 a step (41392 counted twice).
	const steps, step = 4000, 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		var a uint16
		for i := 0; i < steps; i++ {
			a += step
			f.setIdx(0, a, a)
			f.setIdx(1, a, a)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var last [][2]uint64
	for collecting := true; collecting; {
		select {
		case <-done:
			collecting = false
		default:
		}
		s := c.Collect(context.Background(), []Target{tg})[0]
		if len(s.Queues) == 0 {
			continue
		}
		got := counts(s)
		for i := range last {
			if i < len(got) && (got[i][0] < last[i][0] || got[i][1] < last[i][1]) {
				t.Fatalf("queue %d went down: %v -> %v", i, last[i], got[i])
			}
		}
		last = got
	}
	cancel()
	wg.Wait()
	s := c.Collect(context.Background(), []Target{tg})[0]
	want := [][2]uint64{{steps * step, steps * step}, {steps * step, steps * step}}
	if got := grew(base, s); !equal(got, want) {
		t.Errorf("grew %v (missing %v), want %v", got, s.Missing, want)
	}
}
