package exporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/stats"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/test/vhostrig"
	"github.com/netctl/netctl/vdpa"
)

// fixedSource lists fixed targets and samples them with a real
// stats.Collector: the kernel's figures, without QEMU (this test process
// is the VMM: the userspace driver is the guest).
type fixedSource struct {
	ts []stats.Target
	c  *stats.Collector
}

func (f *fixedSource) Targets(context.Context) ([]stats.Target, map[string]error) {
	return f.ts, map[string]error{"test": nil}
}
func (f *fixedSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	return f.c.Collect(ctx, ts)
}
func (f *fixedSource) Forget(t stats.Target) { f.c.Forget(t) }

// scraped scrapes e once on the calling goroutine's thread, so that the
// link is read in the test's network namespace (a registry's Gather would
// run Collect on a goroutine of its own, on any thread).
func scraped(e *Exporter) fixed {
	var ms fixed
	e.scrape(context.Background(), func(m prometheus.Metric) { ms = append(ms, m) })
	return ms
}

// gathered scrapes e once (scraped) and gathers the metrics.
func gathered(t *testing.T, e *Exporter) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(scraped(e))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// sample is the value of name's series whose labels include want.
func sample(mfs []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestVM runs in the 6.12 and 6.1 VMs, one boot each: the exporter's
// metrics from the real kernel's figures.
func TestVM(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	t.Run("vhost", func(t *testing.T) { testVhostMetrics(t, k) })
	t.Run("vdpa", func(t *testing.T) { testVDPAMetrics(t, k) })
	t.Run("migration", func(t *testing.T) { testMigrationSeries(t, k) })
}

// testVhostMetrics: a 2-pair vhost-net NIC whose rings this process
// drives. netctl_vhost_worker_cpu_seconds_total has a series per pair and
// pair 1's rises with 20000 frames sent on pair 1, more than pair 0's;
// netctl_link_transmit_packets_total (the guest's TX: the tap's rx)
// counts them; the output passes client_golang's linter.
func testVhostMetrics(t *testing.T, k *testenv.Kernel) {
	testenv.Host(t)
	rig := vhostrig.New(t, "exv%d", 2)
	tap := rig.Tap
	target := stats.Target{VM: "self", NIC: "vh0", PID: os.Getpid(), Backend: policy.BackendVhostNet, Link: tap.Name(), QueuePairs: 2}
	target.Ifindex = rig.Ifindex
	e := New(&fixedSource{ts: []stats.Target{target}, c: stats.NewCollector(stats.Options{})}, Options{})
	nicL := map[string]string{"vm": "self", "nic": "vh0", "backend": policy.BackendVhostNet}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range nicL {
			m[a] = b
		}
		return m
	}
	before := gathered(t, e)
	for _, q := range []string{"0", "1"} {
		if _, ok := sample(before, "netctl_vhost_worker_cpu_seconds_total", with("queue", q)); !ok {
			t.Fatalf("kernel %s: no netctl_vhost_worker_cpu_seconds_total{queue=%s}", k.Name, q)
		}
	}
	if v, _ := sample(before, "netctl_source_up", with("source", "vhost")); v != 1 {
		t.Errorf("netctl_source_up{source=vhost} = %v", v)
	}
	if v, _ := sample(before, "netctl_nic_up", nicL); v != 1 {
		t.Errorf("netctl_nic_up = %v", v)
	}

	const frames = 20000
	rig.Send(t, 1, frames)
	after := gathered(t, e)
	delta := func(name string, l map[string]string) float64 {
		a, ok1 := sample(after, name, l)
		b, ok2 := sample(before, name, l)
		if !ok1 || !ok2 {
			t.Errorf("%s%v: missing (after %v, before %v)", name, l, ok1, ok2)
		}
		return a - b
	}
	cpu := func(mfs []*dto.MetricFamily) map[int]float64 {
		m := map[int]float64{}
		for p := range 2 {
			if v, ok := sample(mfs, "netctl_vhost_worker_cpu_seconds_total", with("queue", strconv.Itoa(p))); ok {
				m[p] = v
			}
		}
		return m
	}
	vhostrig.CheckWorkerCPU(t, fmt.Sprintf("kernel %s, netctl_vhost_worker_cpu_seconds_total, %d frames on pair 1", k.Name, frames), 1, cpu(before), cpu(after))
	sent := delta("netctl_link_transmit_packets_total", with("device", tap.Name()))
	t.Logf("kernel %s: netctl_link_transmit_packets_total +%.0f", k.Name, sent)
	if sent < frames {
		t.Errorf("netctl_link_transmit_packets_total rose by %.0f, want at least %d", sent, frames)
	}
	problems, err := testutil.CollectAndLint(scraped(e))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// testVDPAMetrics: a VDUSE device's parent has no vendor statistics:
// netctl_source_up{source="vdpa"} is 0 and the reason says "not provided
// by this driver (vduse)". The 6.1 VM has no vDPA: the reason says so.
func testVDPAMetrics(t *testing.T, k *testenv.Kernel) {
	target := stats.Target{VM: "none", NIC: "vd0", Backend: policy.BackendVDPA, VDPA: "exvd0", QueuePairs: 1}
	e := New(&fixedSource{ts: []stats.Target{target}, c: stats.NewCollector(stats.Options{})}, Options{})
	l := map[string]string{"vm": "none", "nic": "vd0", "backend": policy.BackendVDPA, "source": "vdpa"}
	if k.Has("vduse") {
		dev, err := vduse.Create(vduse.Config{Name: "exvd0"})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		cl, err := vdpa.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.AddDevice(context.Background(), vdpa.AddOptions{Name: "exvd0", MgmtDev: "vduse"}); err != nil {
			t.Fatal(err)
		}
		defer cl.DeleteDevice(context.Background(), "exvd0")
		if _, _, err := cl.VStats(context.Background(), "exvd0", 0); !errors.Is(err, vdpa.ErrNotSupported) {
			t.Errorf("the kernel's own answer to vstats on VDUSE: %v, want not supported", err)
		}
	}
	mfs := gathered(t, e)
	if v, ok := sample(mfs, "netctl_source_up", l); !ok || v != 0 {
		t.Errorf("kernel %s: netctl_source_up{source=vdpa} = %v (%v), want 0", k.Name, v, ok)
	}
	var reason string
	for _, mf := range mfs {
		if mf.GetName() != "netctl_source_missing_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, p := range m.GetLabel() {
				labels[p.GetName()] = p.GetValue()
			}
			if labels["source"] == "vdpa" {
				reason = labels["reason"]
			}
		}
	}
	// The reason is a code (netctl stats has the words: "not provided by
	// this driver (vduse)").
	if k.Has("vduse") && reason != "not_supported" {
		t.Errorf("kernel %s: the vdpa reason %q, want not_supported", k.Name, reason)
	}
	if !slices.Contains(ReasonCodes, reason) {
		t.Errorf("kernel %s: the vdpa reason %q is not one of %v", k.Name, reason, ReasonCodes)
	}
	t.Logf("kernel %s: netctl_source_missing_info{source=vdpa}: %q", k.Name, reason)
	if n := testutil.CollectAndCount(e, "netctl_vdpa_queue_received_descriptors_total"); n != 0 {
		t.Errorf("%d vdpa series from a driver without vstats", n)
	}
}
