package exporter

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/netctl/netctl/stats"
)

// TestExporterDiscipline: node_exporter's discipline. One metric per
// quantity (offered and completed descriptors are two metrics, not a
// kind label to sum); no label whose value is free text that changes
// (a reason is one of a fixed set of codes); only the documented source
// values, whatever the source's Missing map or the exporter's own notes
// (a NIC gone, a NIC not sampled) hold.
func TestExporterDiscipline(t *testing.T) {
	src := twoNICs()
	src.fail = map[string]string{"net9": "monitor busy: held by pid 4242 (libvirtd)"}
	src.targets = append(src.targets, stats3("net9"), stats3("net8"))
	src.byTarget = map[string]error{"state": nil, "vm:x": errors.New(`qemuproc: VM "x": monitor /run/x.qmp busy: held by pid 77 (virsh)`)}
	now := time.Unix(1000, 0)
	e := New(src, Options{GoneFor: time.Hour, Now: func() time.Time { return now }})
	testutil.CollectAndCount(e)
	src.targets = src.targets[:3] // net8 gone
	now = now.Add(time.Minute)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		names[mf.GetName()] = mf
	}
	if _, ok := names["netctl_queue_descriptors_total"]; ok {
		t.Errorf("netctl_queue_descriptors_total with a kind label: want one metric per quantity")
	}
	for _, n := range []string{"netctl_queue_offered_descriptors_total", "netctl_queue_completed_descriptors_total"} {
		if names[n] == nil || names[n].GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s: missing or not a counter", n)
		}
	}
	sources := []string{"link", "rings", "vhost", "vdpa", "qmp"}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "kind":
					t.Errorf("%s has a kind label", mf.GetName())
				case "source":
					if !slices.Contains(sources, l.GetValue()) {
						t.Errorf("%s{source=%q}: not a documented source %v", mf.GetName(), l.GetValue(), sources)
					}
				case "reason":
					if !slices.Contains(ReasonCodes, l.GetValue()) {
						t.Errorf("%s{reason=%q}: not one of the reason codes %v", mf.GetName(), l.GetValue(), ReasonCodes)
					}
				}
			}
		}
	}
}

func stats3(nic string) stats.Target {
	return stats.Target{VM: "db1", NIC: nic, Netdev: "netctl-" + nic, QMP: "/run/db1.qmp", Backend: "userspace", Link: "nctl9", QueuePairs: 1}
}
