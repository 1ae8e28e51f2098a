package stats

import (
	"context"
	"fmt"
	"testing"

	"github.com/netctl/netctl/policy"
)

// BenchmarkCollect is the cost of one collection of n NICs, each in its
// own (fake) VM: a QMP dial, x-query-virtio-status and a
// process_vm_readv per NIC once the ring addresses are cached.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("nics=%d", n), func(b *testing.B) {
			var ts []Target
			for i := 0; i < n; i++ {
				f := newFakeVM(b, 2, false)
				ts = append(ts, fakeTarget(f, policy.BackendUserspace))
			}
			c := NewCollector(Options{})
			ctx := context.Background()
			c.Collect(ctx, ts) // resolve once
			b.ResetTimer()
			for range b.N {
				for _, s := range c.Collect(ctx, ts) {
					if len(s.Queues) != 4 {
						b.Fatalf("%+v", s.Missing)
					}
				}
			}
		})
	}
}

// BenchmarkSample is the cost of one Sample of 64 NICs of 2 pairs
// (process_vm_readv only).
func BenchmarkSample(b *testing.B) {
	c := NewCollector(Options{})
	var ts []Target
	for i := 0; i < 64; i++ {
		ts = append(ts, fakeTarget(newFakeVM(b, 2, false), policy.BackendUserspace))
	}
	c.Collect(context.Background(), ts)
	b.ResetTimer()
	for range b.N {
		c.Sample()
	}
}
