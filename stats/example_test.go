package stats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netctl/netctl/stats"
)

// Per-queue rates of every NIC netctl attached, once a second, with the
// rings sampled ten times a second in between so that no 16-bit wrap is
// missed (like `netctl stats --interval 1s`).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ts, err := stats.Targets(ctx, "", "", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	c := stats.NewCollector(stats.Options{Deadline: 2 * time.Second})
	go c.SampleEvery(ctx, 100*time.Millisecond)
	prev := c.Collect(ctx, ts)
	time.Sleep(time.Second)
	cur := c.Collect(ctx, ts)
	for i := range cur {
		r := stats.Rate(prev[i], cur[i])
		for _, q := range r.Queues {
			fmt.Printf("%s %s pair %d %s: %.0f desc/s\n", r.Target.VM, r.Target.NIC, q.Pair, q.Direction, q.Completed)
		}
		for src, why := range cur[i].Missing {
			fmt.Printf("%s %s: no %s: %s\n", r.Target.VM, r.Target.NIC, src, why)
		}
	}
}
