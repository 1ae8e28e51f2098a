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
	StateDir string // "" is /run/netctl
	VMs      []string
	QMPs     []string
	// Domains are libvirt domains (name or UUID) on LibvirtURI whose
	// NICs are listed through libvirt's API (stats.LibvirtTargets).
	Domains    []string
	LibvirtURI string
	Collector  *stats.Collector

	mu   sync.Mutex                // guards last
	last map[string][]stats.Target // each target's last listing, by target name

	// Tests: nil is stats.StateTargets, stats.QEMUTargets and
	// Collector.Forget.
	listState   func(dir string) ([]stats.Target, error)
	listQEMU    func(ctx context.Context, vm, qmp string) ([]stats.Target, error)
	listLibvirt func(ctx context.Context, uri, domain string) ([]stats.Target, error)
	forget      func(stats.Target)
}

// Targets lists the state's NICs (target "state") and each --vm
// ("vm:NAME"), --qmp ("qmp:PATH") and libvirt domain's ("libvirt:NAME")
// virtio-net NICs, each on its
// own, so one VM gone, busy or hung costs only its own NICs: the state is
// read once, the VMs' listings run side by side, each within half of
// what is left of ctx's deadline, so that a monitor that never answers
// leaves the others, and the sampling after them, their time. Each
// listing opens and closes its own QMP connection. A NIC both in the
// state and in a VM's listing is the state's.
//
// A listing that fails (a --vm's monitor busy or hung) gives that
// target's NICs of its last listing whose QEMU still runs (same pid and
// start time): they are then sampled as far as their sources allow (the
// link; the qmp source says why not), not taken for gone; its error is
// still reported. What the Collector kept of their rings is forgotten:
// without the listing nothing says the NIC is still plugged, and a
// detached NIC's rings are memory the guest has freed. They are found
// again once the VM answers: a VM with a UUID goes on with its counts
// (kept for the Collector's KeepFor), one without counts from 0.
func (s *StatsSource) Targets(ctx context.Context) ([]stats.Target, map[string]error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string][]stats.Target{}
	}
	listState, listQEMU, forget := s.listState, s.listQEMU, s.forget
	if listState == nil {
		listState = stats.StateTargets
	}
	if listQEMU == nil {
		listQEMU = stats.QEMUTargets
	}
	listLibvirt := s.listLibvirt
	if listLibvirt == nil {
		listLibvirt = stats.LibvirtTargets
	}
	if forget == nil && s.Collector != nil {
		forget = s.Collector.Forget
	}
	type listing struct{ name, vm, qmp, domain string }
	var ls []listing
	for _, vm := range s.VMs {
		ls = append(ls, listing{name: "vm:" + vm, vm: vm})
	}
	for _, q := range s.QMPs {
		ls = append(ls, listing{name: "qmp:" + q, qmp: q})
	}
	for _, d := range s.Domains {
		ls = append(ls, listing{name: "libvirt:" + d, domain: d})
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
			if l.domain != "" {
				got[i], errs[i] = listLibvirt(lctx, s.LibvirtURI, l.domain)
				return
			}
			got[i], errs[i] = listQEMU(lctx, l.vm, l.qmp)
		}()
	}
	st, serr := listState(s.StateDir)
	wg.Wait()
	by := map[string]error{"state": serr}
	if serr != nil {
		st = s.kept("state", forget)
	}
	s.last["state"] = st
	all := st
	for i, l := range ls {
		ts, err := got[i], errs[i]
		by[l.name] = err
		if err != nil {
			ts = s.kept(l.name, forget)
		}
		s.last[l.name] = ts
		all = stats.MergeTargets(all, ts)
	}
	return all, by
}

// kept are the NICs of target name's last listing whose QEMU still
// runs, their ring state forgotten (s.mu held).
func (s *StatsSource) kept(name string, forget func(stats.Target)) []stats.Target {
	var ts []stats.Target
	for _, t := range s.last[name] {
		if t.PID > 0 && t.PIDStart != 0 && state.SameProcess(t.PID, t.PIDStart) {
			ts = append(ts, t)
			if forget != nil {
				forget(t)
			}
		}
	}
	return ts
}

// Collect samples ts with the Collector.
func (s *StatsSource) Collect(ctx context.Context, ts []stats.Target) []stats.NICStats {
	return s.Collector.Collect(ctx, ts)
}

// Forget drops the Collector's ring state of t.
func (s *StatsSource) Forget(t stats.Target) { s.Collector.Forget(t) }
