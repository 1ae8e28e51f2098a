package exporter

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netctl/netctl/stats"
)

// TestMetricLabels: MetricLabels (what deploy/monitoring's dashboard and
// alerts are checked against) names every metric the exporter describes,
// and every family a scrape serves is there with exactly the labels
// listed.
func TestMetricLabels(t *testing.T) {
	m := MetricLabels()
	if len(m) != len(allDescs()) {
		t.Errorf("MetricLabels has %d metrics, allDescs %d", len(m), len(allDescs()))
	}
	src := twoNICs()
	src.targets = append(src.targets, stats.Target{VM: "gone1", NIC: "net9", Backend: "vdpa", Link: "nctl9", QueuePairs: 1})
	src.fail = map[string]string{"net9": "VM gone: QEMU has exited"}
	src.byTarget = map[string]error{"state": nil, "vm:nope": errString("no VM named nope")}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(src, Options{}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, mf := range mfs {
		served[mf.GetName()] = true
		want, ok := m[mf.GetName()]
		if !ok {
			t.Errorf("%s is served but not in MetricLabels", mf.GetName())
			continue
		}
		for _, s := range mf.GetMetric() {
			var have []string
			for _, l := range s.GetLabel() {
				have = append(have, l.GetName())
			}
			if !sameSet(have, want) {
				t.Errorf("%s is served with labels %v, MetricLabels says %v", mf.GetName(), have, want)
			}
		}
	}
	for _, name := range []string{"netctl_nic_up", "netctl_source_missing_info", "netctl_target_error_info", "netctl_vhost_worker_cpu_seconds_total",
		"netctl_queue_offered_descriptors_total", "netctl_link_transmit_bytes_total", "netctl_scrape_duration_seconds"} {
		if !served[name] {
			t.Errorf("the scrape did not serve %s: the test's source should make it", name)
		}
	}
	// A copy: the caller cannot change the exporter's table.
	m["netctl_nic_up"][0] = "changed"
	delete(m, "netctl_target_up")
	if n := MetricLabels(); n["netctl_nic_up"][0] != "vm" || n["netctl_target_up"] == nil {
		t.Errorf("MetricLabels gave its own table out: %v", n["netctl_nic_up"])
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
