// Package exporter is netctl exporter: a Prometheus exporter for the
// per-queue figures of package stats.
//
// Each scrape lists the NICs afresh (every NIC in netctl's state plus
// every virtio-net NIC of the VMs it was given with --vm or --qmp),
// samples them under a deadline, and turns the samples into metrics
// (metrics.go has the list). Nothing is held between scrapes: no QMP
// connection stays open, and a VM that is gone or whose monitor is busy
// costs only that VM's NICs (netctl_nic_up 0, netctl_source_up 0 with
// the reason in netctl_source_missing_info); the other NICs are served as
// usual. The ring counters belong to the VM (its UUID: see package stats),
// so a migration to another QEMU on this host goes on with them; of two
// QEMUs that have the same VM's NIC (a migration's source and
// destination), the one that counts its rings is served. A NIC that was listed once and is no longer stays in the output
// with netctl_nic_up 0 for Options.GoneFor, so that a dashboard sees it
// go down rather than vanish.
//
// Like netctl exporter --listen 127.0.0.1:9465 [--vm NAME|--qmp SOCKET ...].
package exporter

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/stats"
)

// Source lists and samples NICs. *StatsSource (package stats) is the real
// one; tests give a fake.
type Source interface {
	// Targets lists the NICs to sample now. byTarget has every target
	// it was given (a --vm, a --qmp, the state directory) by name: nil
	// for one that was listed, else why not. A target that cannot be
	// listed costs only its own NICs.
	Targets(ctx context.Context) (ts []stats.Target, byTarget map[string]error)
	// Collect samples ts; a NIC whose sources fail has them in Missing.
	// It returns one NICStats per target, in any order.
	Collect(ctx context.Context, ts []stats.Target) []stats.NICStats
	// Forget drops what the source keeps about a NIC that is gone.
	Forget(t stats.Target)
}

// Options tune an Exporter.
type Options struct {
	// ScrapeTimeout bounds a scrape: listing and sampling every NIC
	// (default 5s). A scrape request's own X-Prometheus-Scrape-Timeout-Seconds
	// lowers it.
	ScrapeTimeout time.Duration
	// GoneFor is how long a NIC that is no longer listed stays in the
	// output with netctl_nic_up 0 (default 5m).
	GoneFor time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Exporter is a prometheus.Collector that samples on every scrape. It is
// safe for concurrent use; scrapes run one at a time. Links are read in
// the network namespace of the thread a scrape runs on (a registry runs
// Collect on goroutines of its own): run it in a process that is wholly in
// the namespace of the taps, as netctl exporter is.
type Exporter struct {
	src  Source
	opts Options

	// turn is held by the scrape under way (scrapes run one at a time);
	// it guards gone and last. A scrape waits for it only until its own
	// deadline.
	turn chan struct{}
	gone map[nicKey]goneNIC      // NICs listed before and not now
	last map[nicKey]stats.Target // NICs listed by the last scrape
}

type nicKey struct{ vm, qmp, nic string }

type goneNIC struct {
	t     stats.Target
	since time.Time
}

func keyOf(t stats.Target) nicKey { return nicKey{t.VM, t.QMP, t.NIC} }

// New makes an Exporter over src.
func New(src Source, o Options) *Exporter {
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 5 * time.Second
	}
	if o.GoneFor <= 0 {
		o.GoneFor = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Exporter{src: src, opts: o, turn: make(chan struct{}, 1), gone: map[nicKey]goneNIC{}, last: map[nicKey]stats.Target{}}
}

// Describe sends every metric's description.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs() {
		ch <- d
	}
}

// Collect scrapes under Options.ScrapeTimeout. A scrape that could not
// start within it (another one held the exporter all along) is an
// invalid metric: the registry's Gather then fails with that error.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.ScrapeTimeout)
	defer cancel()
	if err := e.scrape(ctx, func(m prometheus.Metric) { ch <- m }); err != nil {
		ch <- prometheus.NewInvalidMetric(descScrapeSeconds, err)
	}
}

// scrape lists, samples and emits. ctx bounds it, the wait for a scrape
// under way included: when ctx ends first, scrape emits nothing and
// says so.
func (e *Exporter) scrape(ctx context.Context, emit func(prometheus.Metric)) error {
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("another scrape was still under way when this one's deadline passed (%w): a VM's monitor may be hung; the next scrape tries again", ctx.Err())
	}
	defer func() { <-e.turn }()
	start := e.opts.Now()
	ts, terrs := e.src.Targets(ctx)

	// One NIC once: the state directory and a --vm can both list it.
	seen := map[nicKey]bool{}
	var uniq []stats.Target
	for _, t := range ts {
		if k := keyOf(t); !seen[k] {
			seen[k] = true
			uniq = append(uniq, t)
		}
	}
	now := e.opts.Now()
	for k, t := range e.last {
		if !seen[k] {
			e.gone[k] = goneNIC{t: t, since: now}
			// A gone NIC shows no counters: nothing kept for it is of use,
			// and the sampler would go on reading its old rings. Listed
			// again (attached again), it starts afresh.
			e.src.Forget(t)
		}
	}
	for _, t := range uniq { // the same NIC of a restarted QEMU: drop the old one's ring state
		if old, ok := e.last[keyOf(t)]; ok && old.Key() != t.Key() {
			e.src.Forget(old)
		}
	}
	e.last = map[nicKey]stats.Target{}
	for _, t := range uniq {
		e.last[keyOf(t)] = t
		delete(e.gone, keyOf(t))
	}
	for k, g := range e.gone {
		if now.Sub(g.since) > e.opts.GoneFor {
			delete(e.gone, k)
		}
	}

	var got []stats.NICStats
	if len(uniq) > 0 {
		got = e.src.Collect(ctx, uniq)
	}
	// Whatever the source returns, each listed NIC is reported once: one
	// it did not return is down with the reason.
	byKey := map[nicKey]stats.NICStats{}
	for _, s := range got {
		if k := keyOf(s.Target); seen[k] {
			if _, dup := byKey[k]; !dup {
				byKey[k] = s
			}
		}
	}
	// One NIC per label set: a VM's NIC that two QEMUs have while one
	// migrates to the other on this host (same -name or UUID, same id) is
	// served from the better of the two (better), so that its series
	// never switch back and forth between them.
	labelsSeen := map[[3]string]bool{}
	var order [][3]string
	best := map[[3]string]served{}
	for _, t := range uniq {
		s, ok := byKey[keyOf(t)]
		if !ok {
			why := "no sample: the scrape's deadline passed before this NIC was sampled"
			if ctx.Err() == nil {
				why = "no sample returned for this NIC"
			}
			s = stats.NICStats{Target: t, Missing: map[string]string{"sample": why}}
		} else {
			e.last[keyOf(t)] = s.Target // with the VM's UUID, as the source found it
		}
		v := served{s: s, up: nicUp(s)}
		l := nicLabelValues(s.Target)
		if cur, dup := best[l]; !dup {
			order = append(order, l)
			best[l] = v
		} else if v.better(cur) {
			best[l] = v
		}
	}
	for _, l := range order {
		labelsSeen[l] = true
		nicMetrics(best[l].s, best[l].up, l[:], emit)
	}
	goneKeys := make([]nicKey, 0, len(e.gone))
	for k := range e.gone {
		goneKeys = append(goneKeys, k)
	}
	sort.Slice(goneKeys, func(i, j int) bool { return fmt.Sprint(goneKeys[i]) < fmt.Sprint(goneKeys[j]) })
	for _, k := range goneKeys {
		g := e.gone[k]
		l := nicLabelValues(g.t)
		if labelsSeen[l] {
			continue
		}
		labelsSeen[l] = true
		why := fmt.Sprintf("gone since %s: no longer listed (VM exited, NIC detached, or its VM no longer answers)", g.since.UTC().Format(time.RFC3339))
		nicMetrics(stats.NICStats{Target: g.t, Missing: map[string]string{"nic": why}}, false, l[:], emit)
	}
	targetsSeen := map[string]bool{}
	for _, name := range sortedTargetNames(terrs) {
		if l := labelValue(name); targetsSeen[l] {
			continue // two names that differ only in bytes that are not UTF-8: the first wins
		} else {
			targetsSeen[l] = true
		}
		if terrs[name] == nil {
			emit(constMetric(descTargetUp, prometheus.GaugeValue, 1, name))
			continue
		}
		emit(constMetric(descTargetUp, prometheus.GaugeValue, 0, name))
		emit(constMetric(descTargetError, prometheus.GaugeValue, 1, name, reasonLabel(terrs[name].Error())))
	}
	emit(constMetric(descScrapeNICs, prometheus.GaugeValue, float64(len(labelsSeen))))
	emit(constMetric(descScrapeSeconds, prometheus.GaugeValue, e.opts.Now().Sub(start).Seconds()))
	return nil
}

func sortedTargetNames(m map[string]error) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// nicLabelValues are vm, nic, backend (valid UTF-8: labelValue); a VM
// without a -name is named by its UUID, else by its QMP socket (which a
// migration changes).
func nicLabelValues(t stats.Target) [3]string {
	vm := t.VM
	if vm == "" {
		vm = t.UUID
	}
	if vm == "" {
		vm = t.QMP
	}
	return [3]string{labelValue(vm), labelValue(t.NIC), labelValue(t.Backend)}
}

// served is a NIC's sample in a scrape and whether it is up.
type served struct {
	s  stats.NICStats
	up bool
}

// better says v is served rather than w, both with the same labels: one
// that is up, then one whose rings are counted (a VM's ring counts are
// one QEMU's at a time: the destination's once it took the NIC over, the
// source's until then), then the later QEMU (a migration's destination),
// else the first listed.
func (v served) better(w served) bool {
	if v.up != w.up {
		return v.up
	}
	if vq, wq := len(v.s.Queues) > 0, len(w.s.Queues) > 0; vq != wq {
		return vq
	}
	return v.s.Target.PIDStart > w.s.Target.PIDStart && v.s.Target.PID > 0 && w.s.Target.PID > 0
}

// nicUp: the NIC's QEMU still runs (same pid and start time, when the
// target names them) and some source gave figures for it. A busy monitor
// alone does not make a NIC down: its link and cached rings still count;
// netctl_source_up{source="qmp"} says the monitor was busy.
func nicUp(s stats.NICStats) bool {
	if t := s.Target; t.PID > 0 && t.PIDStart != 0 && !state.SameProcess(t.PID, t.PIDStart) {
		return false
	}
	return s.Link != nil || len(s.Queues) > 0 || len(s.Workers) > 0 || len(s.VDPA) > 0
}
