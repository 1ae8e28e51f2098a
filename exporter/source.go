package exporter

import (
	"context"
	"sync"
	"time"

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
// own, so one VM gone, busy or hung costs only its own NICs: the
// listings run side by side, each within half of what is left of ctx's
// deadline, so that a monitor that never answers leaves the others, and
// the sampling after them, their time. Each listing opens and closes its
// own QMP connection (stats.Targets). A listing that fails (a --vm's
// monitor busy or hung) gives that target's NICs of its last listing
// whose QEMU still runs (same pid and start time): they are then sampled
// as far as their sources allow (the link, cached ring addresses; the
// qmp source says why not), not taken for gone; its error is still
// reported.
func (s *StatsSource) Targets(ctx context.Context) ([]stats.Target, map[string]error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string][]stats.Target{}
	}
	type listing struct{ name, vm, qmp string }
	ls := []listing{{name: "state"}}
	for _, vm := range s.VMs {
		ls = append(ls, listing{name: "vm:" + vm, vm: vm})
	}
	for _, q := range s.QMPs {
		ls = append(ls, listing{name: "qmp:" + q, qmp: q})
	}
	lctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		lctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	got := make([][]stats.Target, len(ls))
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = stats.Targets(lctx, s.StateDir, l.vm, l.qmp)
		}()
	}
	wg.Wait()
	by := map[string]error{}
	var all []stats.Target
	for i, l := range ls {
		ts, err := got[i], errs[i]
		by[l.name] = err
		if err != nil {
			ts = nil
			for _, t := range s.last[l.name] {
				if t.PID > 0 && t.PIDStart != 0 && state.SameProcess(t.PID, t.PIDStart) {
					ts = append(ts, t)
				}
			}
		}
		s.last[l.name] = ts
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
