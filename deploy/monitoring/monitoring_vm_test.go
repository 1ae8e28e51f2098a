package monitoring

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/netctl/netctl/exporter"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/stats"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/prom"
	"github.com/netctl/netctl/test/vhostrig"
)

// rigSource lists one fixed NIC and samples it with a real
// stats.Collector (this test process is the VMM; its userspace driver is
// the guest).
type rigSource struct {
	ts []stats.Target
	c  *stats.Collector
}

func (f *rigSource) Targets(context.Context) ([]stats.Target, map[string]error) {
	return f.ts, map[string]error{"test": nil}
}
func (f *rigSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	return f.c.Collect(ctx, ts)
}
func (f *rigSource) Forget(t stats.Target) { f.c.Forget(t) }

// TestVMWorkerQueries, in the test VM (6.12, 6.1): what the host cannot
// make, a vhost-net NIC's worker threads: a 2-pair vhost-net NIC driven
// by this process sends on pair 1, netctl exporter's collector serves
// it, and the host's Prometheus (chrooted into the VM's view of the host)
// scrapes it with netctl-alerts.yml loaded: every rule evaluates
// healthy, and the vhost worker CPU panel's query answers a series per
// queue pair with the labels its legend shows, pair 1's rate above 0.
func TestVMWorkerQueries(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	testenv.Host(t)
	if err := l2.Chroot(); err != nil {
		t.Fatal(err)
	}
	rig := vhostrig.New(t, "mon%d", 2)
	target := stats.Target{VM: "self", NIC: "vh0", PID: os.Getpid(), Backend: policy.BackendVhostNet, Link: rig.Tap.Name(), QueuePairs: 2, Ifindex: rig.Ifindex}
	e := exporter.New(&rigSource{ts: []stats.Target{target}, c: stats.NewCollector(stats.Options{})}, exporter.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:9466") // on this thread: in the test's network namespace
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- exporter.Serve(sctx, ln, e.Handler()) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("exporter.Serve: %v", err)
		}
	}()
	alerts, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	ps := prom.StartChroot(t, prom.NewHTTP(t), l2.Root, "127.0.0.1:9466", alerts)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Traffic on pair 1 across several scrapes, so that a rate over 20 s
	// sees it.
	for i := 0; i < 8; i++ {
		rig.Send(t, 1, 2000)
		time.Sleep(time.Second)
	}
	ps.Wait(ctx, t, `count_over_time(netctl_vhost_worker_cpu_seconds_total{queue="1"}[20s])`, func(v float64) bool { return v >= 4 })
	time.Sleep(5 * time.Second) // two rule evaluations over these series

	_, checked, absent := checkOnPrometheus(t, ps)
	if slices.Contains(absent, "netctl_vhost_worker_cpu_seconds_total") {
		t.Fatalf("kernel %s: Prometheus has no netctl_vhost_worker_cpu_seconds_total", k.Name)
	}
	// Over 2 minutes, not 20 s: the traffic ended before the wait, the
	// rule evaluations and the 35 queries above, which took more than 20 s
	// in a loaded CI run (a flat counter over the window: rate 0).
	got, body, err := ps.Query(`rate(netctl_vhost_worker_cpu_seconds_total{queue="1"}[2m])`)
	if err != nil || len(got) != 1 || got[0].Value <= 0 {
		t.Fatalf("kernel %s: pair 1's worker CPU rate: %v %v: %s", k.Name, got, err, body)
	}
	t.Logf("kernel %s: %d queries checked on the served series; pair 1's worker at %.3f of a CPU", k.Name, checked, got[0].Value)
}
