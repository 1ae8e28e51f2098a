package exporter

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/netctl/netctl/stats"
)

// migratingSource lists what each scrape of a migration on this host
// lists: a sample per target, as stats.Collector gives them (the VM's
// UUID filled in).
type migratingSource struct {
	samples   []stats.NICStats
	forgotten []stats.Target
}

func (m *migratingSource) Targets(context.Context) ([]stats.Target, map[string]error) {
	var ts []stats.Target
	for _, s := range m.samples {
		t := s.Target
		t.UUID = "" // as listed: the Collector finds the UUID
		ts = append(ts, t)
	}
	return ts, map[string]error{"state": nil}
}

func (m *migratingSource) Collect(_ context.Context, ts []stats.Target) []stats.NICStats {
	return m.samples
}

func (m *migratingSource) Forget(t stats.Target) { m.forgotten = append(m.forgotten, t) }

// TestExporterMigrationServesOneQEMU: a VM (with a -name, and without
// one: its series then named by its UUID, not by the QMP socket, which a
// migration changes) migrates to another QEMU on this host. While both QEMUs have its NIC,
// the series (same vm, nic, backend) are served from the QEMU that
// counts the rings: the source until the destination took them over,
// the destination after; whichever is listed first. The offered counter
// never goes back, and netctl_nic_info names the QEMU served and the
// VM's UUID.
func TestExporterMigrationServesOneQEMU(t *testing.T) {
	for _, vm := range []string{"", "web1"} {
		t.Run("vm="+vm, func(t *testing.T) { testMigrationServesOneQEMU(t, vm) })
	}
}

func testMigrationServesOneQEMU(t *testing.T, vm string) {
	const uuid = "6f1c2a7e-58d4-4f4e-9b0a-0c8e2d1f3a42"
	label := vm
	if label == "" {
		label = uuid
	}
	nic := func(qmp string, pid int, start uint64, offered uint64, link string) stats.NICStats {
		s := stats.NICStats{Target: stats.Target{VM: vm, NIC: "net1", QMP: qmp, PID: pid, PIDStart: start, Backend: "vhost-net",
			Link: link, QueuePairs: 1, UUID: uuid},
			Link: &stats.LinkStats{}}
		if offered > 0 {
			s.Queues = []stats.QueueStats{{Pair: 0, Direction: "rx", Offered: offered}}
		} else {
			s.Missing = map[string]string{"rings": "the guest's driver has not started the device (status 0)"}
		}
		return s
	}
	src := func(offered uint64) stats.NICStats { return nic("/run/src.qmp", 100, 1000, offered, "tapsrc") }
	dst := func(offered uint64) stats.NICStats { return nic("/run/dst.qmp", 200, 2000, offered, "tapdst") }
	yielded := src(0)
	yielded.Missing = map[string]string{"rings": "NIC gone from this QEMU: counted from QEMU pid 200 now"}
	m := &migratingSource{}
	e := New(m, Options{})
	for i, step := range []struct {
		samples []stats.NICStats
		offered float64
		qmp     string
	}{
		{[]stats.NICStats{src(100)}, 100, "/run/src.qmp"},
		{[]stats.NICStats{dst(0), src(110)}, 110, "/run/src.qmp"}, // the destination loading
		{[]stats.NICStats{src(110), dst(0)}, 110, "/run/src.qmp"},
		{[]stats.NICStats{yielded, dst(125)}, 125, "/run/dst.qmp"}, // the destination took over
		{[]stats.NICStats{dst(126), yielded}, 126, "/run/dst.qmp"},
		{[]stats.NICStats{dst(130)}, 130, "/run/dst.qmp"}, // the source quit
	} {
		m.samples = step.samples
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(e)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		got, ok := sample(mfs, "netctl_queue_offered_descriptors_total", map[string]string{"vm": label, "nic": "net1", "queue": "0"})
		if !ok || got != step.offered {
			t.Errorf("scrape %d: offered %v (present %v), want %v", i, got, ok, step.offered)
		}
		if _, ok := sample(mfs, "netctl_nic_info", map[string]string{"vm": label, "qmp": step.qmp, "uuid": uuid}); !ok {
			t.Errorf("scrape %d: netctl_nic_info does not name %s and the UUID: %v", i, step.qmp, infoOf(mfs))
		}
	}
}

func infoOf(mfs []*dto.MetricFamily) []*dto.Metric {
	for _, mf := range mfs {
		if mf.GetName() == "netctl_nic_info" {
			return mf.GetMetric()
		}
	}
	return nil
}
