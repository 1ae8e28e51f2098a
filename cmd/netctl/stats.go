package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/stats"
)

// The interval's range: shorter than 100 ms the rates are mostly noise
// (and the sampling itself costs more than it shows), longer than an hour
// is a job for the exporter.
const (
	minStatsInterval = 100 * time.Millisecond
	maxStatsInterval = time.Hour
)

// sampleTimeout bounds one sample (listing and collecting every NIC):
// the interval, but at least a second (QMP round trips) and at most
// stats.DefaultDeadline.
func sampleTimeout(interval time.Duration) time.Duration {
	return min(max(interval, time.Second), stats.DefaultDeadline)
}

// ringSampleEvery: how often netctl stats reads the rings between its
// samples, so that it follows a ring up to 327,680 descriptors a second
// (stats.Collector.Sample: half a 16-bit turn per read).
const ringSampleEvery = 100 * time.Millisecond

func statsCommand() *cli.Command {
	const path = "netctl stats"
	return &cli.Command{
		Name:  "stats",
		Usage: "per-queue rates of a VM's NICs (or of every NIC netctl attached): link packets and bytes, ring descriptors, vhost worker CPU",
		Description: "netctl stats samples twice, one --interval apart, and prints the rates per second; --watch keeps sampling\n" +
			"and redraws. rx and tx are the guest's: rx is what the guest received (a tap's tx, a macvtap's rx). Sources: the host\n" +
			"link's counters (per NIC: tun and macvtap have none per queue), each virtqueue's ring indices read from\n" +
			"QEMU's memory, each queue pair's vhost-net worker thread, vdpa vstats. A source that gives nothing says why.\n" +
			"With neither --vm nor --qmp: every NIC in netctl's state (/run/netctl, NETCTL_RUN_DIR).",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "libvirt", Value: libvirtdom.DefaultURI, Usage: "with --vm: the libvirt connection of a libvirt domain (found by name or UUID); a VM whose monitor libvirt holds is one on the default URI"},
			&cli.BoolFlag{Name: "qemu-monitor", Usage: "for a libvirt domain: also count the rings, asking QEMU through libvirt's monitor passthrough; libvirt then marks the domain \"tainted: custom-monitor\""},
			&cli.StringFlag{Name: "id", Usage: "only this NIC (its device id in QEMU)"},
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between samples (100ms to 1h)"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "keep sampling every --interval until interrupted"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "one JSON object per interval (JSON lines; field names in docs/stats.md)"},
		),
		Action: func(c *cli.Context) error {
			iv := c.Duration("interval")
			if iv < minStatsInterval || iv > maxStatsInterval {
				return usageErr(path, "--interval %s: out of range: use %s to %s", iv, minStatsInterval, maxStatsInterval)
			}
			vm, q := c.String("vm"), c.String("qmp")
			if vm != "" && q != "" {
				return usageErr(path, "give --vm NAME or --qmp SOCKET, not both")
			}
			if id := c.String("id"); id != "" {
				if err := state.CheckID(id); err != nil {
					return usageErr(path, "--id %q: %v", id, err)
				}
			}
			uri, lv, err := libvirtStatsFor(c, path)
			if err != nil {
				return err
			}
			if c.Bool("qemu-monitor") && !lv {
				return usageErr(path, "--qemu-monitor is for a libvirt domain (--vm DOMAIN): netctl reads a hand-run QEMU's own monitor without it")
			}
			if c.Bool("watch") {
				// A watch prints before it may meet a NIC attached
				// through libvirt; the one-shot prints after its last
				// target is opened.
				if err := handOverNow(); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := &statsWatch{vm: vm, qmp: q, id: c.String("id"), interval: iv, json: c.Bool("json"),
				out: c.App.Writer, col: stats.NewCollector(stats.Options{LibvirtMonitor: c.Bool("qemu-monitor")})}
			if lv {
				w.libvirt = &uri
			}
			if q != "" {
				abs, err := filepath.Abs(q)
				if err != nil {
					return usageErr(path, "--qmp %s: %v", q, err)
				}
				w.qmp = abs
			}
			w.clear = !w.json && isTerminal(rawWriter(c.App.Writer))
			if iv > ringSampleEvery {
				// A 16-bit ring index wraps after 65536 descriptors: read
				// the rings between samples too (no QMP, no fd held).
				go w.col.SampleEvery(ctx, ringSampleEvery)
			}
			return w.run(ctx, c.Bool("watch"))
		},
	}
}

// statsWatch is one run of netctl stats: the targets it has seen, their
// last samples, and where it prints.
type statsWatch struct {
	vm, qmp, id string
	interval    time.Duration
	json, clear bool
	out         io.Writer
	col         collector
	// libvirt: --vm is a libvirt domain on this URI (nil: not one).
	libvirt *string
	// lister lists the targets (tests); nil is list.
	lister func(context.Context) ([]stats.Target, error)

	order []string                  // target keys, in the order first seen
	seen  map[string]stats.Target   // every target seen, by nicKey
	prev  map[string]stats.NICStats // last sample, by nicKey
	gone  map[string]bool           // seen once, not listed any more
}

// collector is what a watch needs of *stats.Collector (a test records
// what it is told to forget).
type collector interface {
	Collect(context.Context, []stats.Target) []stats.NICStats
	Forget(stats.Target)
	SampleEvery(context.Context, time.Duration)
}

// nicKey names a NIC across samples: its VM (or socket) and id.
func nicKey(t stats.Target) string { return t.VM + "\x00" + t.QMP + "\x00" + t.NIC }

// list resolves the targets now: --vm/--qmp's VM's NICs (the state's
// records of that QEMU and whatever QEMU has), or every NIC in the state;
// then --id.
func (w *statsWatch) list(ctx context.Context) ([]stats.Target, error) {
	if w.libvirt != nil {
		return w.listLibvirt(ctx)
	}
	pid := 0
	if w.vm != "" || w.qmp != "" {
		v, err := qemuproc.Resolve(ctx, w.vm, w.qmp)
		if err != nil {
			return nil, err
		}
		pid = v.PID
	}
	ts, err := stats.Targets(ctx, runDir(), w.vm, w.qmp)
	if err != nil {
		return nil, err
	}
	var out []stats.Target
	for _, t := range ts {
		if pid != 0 && t.PID != pid {
			continue // another VM's record in the state
		}
		if w.id != "" && t.NIC != w.id {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// noTargets says why there is nothing to show and what to do.
func (w *statsWatch) noTargets(ctx context.Context) error {
	where := "netctl's state has no NICs (netctl list shows them): attach one, or name a VM with --vm NAME or --qmp SOCKET"
	if w.vm != "" || w.qmp != "" {
		where = "the VM has no virtio-net NIC"
	}
	if w.id == "" {
		return fmt.Errorf("no NICs: %s", where)
	}
	save := w.id
	w.id = ""
	all, _ := w.list(ctx)
	w.id = save
	var ids []string
	for _, t := range all {
		if !slices.Contains(ids, t.NIC) {
			ids = append(ids, t.NIC)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("no NIC %q: %s", w.id, where)
	}
	return fmt.Errorf("no NIC %q: name one of %s with --id (netctl list shows netctl's NICs)", w.id, strings.Join(ids, ", "))
}

// sample lists and collects once; NICs listed before and not now (or
// whose QEMU has exited) are gone from then on. When the listing fails,
// the NICs listed before whose QEMU still runs stay.
func (w *statsWatch) sample(ctx context.Context) (cur map[string]stats.NICStats, listErr error) {
	lister := w.lister
	if lister == nil {
		lister = w.list
	}
	// A VM whose monitor never answers must not stop the watch: the
	// sample has a deadline, and the listing half of it.
	d := sampleTimeout(w.interval)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, d/2)
	ts, err := lister(lctx)
	lcancel()
	if err != nil {
		// A listing that fails (the monitor busy or hung) is not a
		// detach: the NICs listed before whose QEMU still runs are
		// sampled as far as their sources allow.
		listErr = err
		ts = nil
		for _, k := range w.order {
			if t := w.seen[k]; !w.gone[k] && t.PID > 0 && t.PIDStart != 0 && state.SameProcess(t.PID, t.PIDStart) {
				ts = append(ts, t)
			}
		}
	}
	listed := map[string]bool{}
	var live []stats.Target
	for _, t := range ts {
		k := nicKey(t)
		if listed[k] {
			continue
		}
		listed[k] = true
		if old, ok := w.seen[k]; !ok {
			w.order = append(w.order, k)
		} else if old.Key() != t.Key() {
			// The same name and id, another target: the VM restarted
			// (another pid) or the NIC was attached again. What the
			// Collector keeps of the old one (its rings' addresses and
			// counts) would never be dropped, and a rate across the
			// two would be nonsense: forget both; the NIC starts over.
			w.col.Forget(old)
			delete(w.prev, k)
		}
		w.seen[k] = t
		if t.PID != 0 && t.PIDStart != 0 && !state.SameProcess(t.PID, t.PIDStart) {
			w.markGone(k) // a record whose QEMU has exited
			continue
		}
		delete(w.gone, k)
		live = append(live, t)
	}
	for k := range w.seen {
		if !listed[k] {
			w.markGone(k)
		}
	}
	cur = map[string]stats.NICStats{}
	for _, s := range w.col.Collect(ctx, live) {
		cur[nicKey(s.Target)] = s
	}
	return cur, listErr
}

func (w *statsWatch) markGone(k string) {
	if !w.gone[k] {
		w.gone[k] = true
		w.col.Forget(w.seen[k])
		delete(w.prev, k)
	}
}

// view builds the interval's sample from the last two collections.
func (w *statsWatch) view(cur map[string]stats.NICStats, dt time.Duration, now time.Time) statsSample {
	s := statsSample{Time: now, IntervalSeconds: dt.Seconds()}
	for _, k := range w.order {
		t := w.seen[k]
		c, ok := cur[k]
		switch p, had := w.prev[k]; {
		case w.gone[k] || !ok:
			s.NICs = append(s.NICs, nicRates{VM: t.VM, NIC: t.NIC, QMP: t.QMP, Backend: t.Backend, Link: t.Link, State: stateGone, Queues: []queueRates{}})
		case !had: // first seen in this sample: a rate needs two
			n := nicView(c, c)
			n.RX, n.TX, n.Queues = nil, nil, nil
			if n.Missing == nil {
				n.Missing = map[string]string{}
			}
			n.Missing["sample"] = "first sampled in this interval: its rates start with the next one"
			s.NICs = append(s.NICs, n)
		default:
			s.NICs = append(s.NICs, nicView(p, c))
		}
	}
	for k, c := range cur {
		w.prev[k] = c
	}
	return s
}

func (w *statsWatch) print(s statsSample) error {
	if w.json {
		return writeStatsJSON(w.out, s)
	}
	if w.clear {
		io.WriteString(rawWriter(w.out), "\x1b[H\x1b[2J") // netctl's own sequence, past the escaping
	}
	return writeStatsTable(w.out, s)
}

// run samples, waits an interval, samples again and prints the rates;
// with watch it goes on until ctx ends (interrupt: exit 0).
func (w *statsWatch) run(ctx context.Context, watch bool) error {
	w.seen, w.prev, w.gone = map[string]stats.Target{}, map[string]stats.NICStats{}, map[string]bool{}
	cur, err := w.sample(ctx)
	if err != nil {
		return err
	}
	if len(cur) == 0 {
		return w.noTargets(ctx)
	}
	for k, c := range cur {
		w.prev[k] = c
	}
	last := time.Now()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	// An interrupt ends a watch (exit 0); a one-shot interrupted before
	// its second sample has printed nothing, and says so (exit 1).
	interrupted := func() error {
		if watch {
			return nil
		}
		return fmt.Errorf("interrupted before the second sample (%s after the first): nothing to show", w.interval)
	}
	for {
		select {
		case <-ctx.Done():
			return interrupted()
		case <-t.C:
		}
		cur, err := w.sample(ctx)
		if ctx.Err() != nil {
			return interrupted()
		}
		now := time.Now()
		if err != nil && !watch {
			return err
		}
		v := w.view(cur, now.Sub(last), now)
		if err != nil {
			v.ListError = err.Error()
		}
		if err := w.print(v); err != nil {
			return err
		}
		last = now
		if !watch {
			return nil
		}
	}
}

// isTerminal: w is a terminal (the watch then redraws in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
