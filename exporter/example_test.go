package exporter_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/netctl/netctl/exporter"
	"github.com/netctl/netctl/stats"
)

// Serve every NIC netctl attached plus VM web1's on 127.0.0.1:9465, as
// netctl exporter --vm web1 does.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := exporter.Listen(ctx, "127.0.0.1:9465", false)
	if err != nil {
		log.Fatal(err)
	}
	col := stats.NewCollector(stats.Options{Deadline: 5 * time.Second})
	go col.SampleEvery(ctx, 100*time.Millisecond) // follow ring wraps between scrapes
	e := exporter.New(&exporter.StatsSource{VMs: []string{"web1"}, Collector: col}, exporter.Options{ScrapeTimeout: 5 * time.Second})
	if err := exporter.Serve(ctx, ln, e.Handler()); err != nil {
		log.Fatal(err)
	}
}
