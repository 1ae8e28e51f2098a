package exporter

import (
	"context"

	"github.com/netctl/netctl/stats"
)

// StatsSource is the real Source: netctl's state directory plus the VMs
// named by --vm and --qmp, sampled by a stats.Collector.
type StatsSource struct {
	StateDir  string // "" is /run/netctl
	VMs       []string
	QMPs      []string
	Collector *stats.Collector
}

// Targets lists the state's NICs (target "state") and each --vm
// ("vm:NAME") and --qmp ("qmp:PATH") VM's virtio-net NICs, each on its
// own, so one VM gone or busy costs only its own NICs. Each listing
// opens and closes its own QMP connection (stats.Targets).
func (s *StatsSource) Targets(ctx context.Context) ([]stats.Target, map[string]error) {
	by := map[string]error{}
	var all []stats.Target
	ts, err := stats.Targets(ctx, s.StateDir, "", "")
	by["state"] = err
	all = append(all, ts...)
	for _, vm := range s.VMs {
		ts, err := stats.Targets(ctx, s.StateDir, vm, "")
		by["vm:"+vm] = err
		all = append(all, ts...)
	}
	for _, q := range s.QMPs {
		ts, err := stats.Targets(ctx, s.StateDir, "", q)
		by["qmp:"+q] = err
		all = append(all, ts...)
	}
	return all, by
}

// Collect samples ts with the Collector.
func (s *StatsSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	return s.Collector.Collect(ctx, ts)
}

// Forget drops the Collector's ring state of t.
func (s *StatsSource) Forget(t stats.Target) { s.Collector.Forget(t) }
