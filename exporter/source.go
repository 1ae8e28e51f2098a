package exporter

import (
	"context"
	"sync"

	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/stats"
)

// StatsSource is the real Source: netctl's state directory plus the VMs
// named by --vm and --qmp, sampled by a stats.Collector.
type StatsSource struct {
	StateDir  string // "" is /run/netctl
	VMs       []string
	QMPs      []string
	Collector *stats.Collector

	mu   sync.Mutex                // guards last
	last map[string][]stats.Target // each target's last listing, by target name
}

// Targets lists the state's NICs (target "state") and each --vm
// ("vm:NAME") and --qmp ("qmp:PATH") VM's virtio-net NICs, each on its
// own, so one VM gone or busy costs only its own NICs. Each listing
// opens and closes its own QMP connection (stats.Targets). A listing
// that fails (a --vm's monitor busy or hung) gives that target's NICs
// of its last listing whose QEMU still runs (same pid and start time):
// they are then sampled as far as their sources allow (the link, cached
// ring addresses; the qmp source says why not), not taken for gone; its
// error is still reported.
func (s *StatsSource) Targets(ctx context.Context) ([]stats.Target, map[string]error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string][]stats.Target{}
	}
	by := map[string]error{}
	var all []stats.Target
	list := func(name, vm, qmp string) {
		ts, err := stats.Targets(ctx, s.StateDir, vm, qmp)
		by[name] = err
		if err != nil {
			ts = nil
			for _, t := range s.last[name] {
				if t.PID > 0 && t.PIDStart != 0 && state.SameProcess(t.PID, t.PIDStart) {
					ts = append(ts, t)
				}
			}
		}
		s.last[name] = ts
		all = append(all, ts...)
	}
	list("state", "", "")
	for _, vm := range s.VMs {
		list("vm:"+vm, vm, "")
	}
	for _, q := range s.QMPs {
		list("qmp:"+q, "", q)
	}
	return all, by
}

// Collect samples ts with the Collector.
func (s *StatsSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	return s.Collector.Collect(ctx, ts)
}

// Forget drops the Collector's ring state of t.
func (s *StatsSource) Forget(t stats.Target) { s.Collector.Forget(t) }
