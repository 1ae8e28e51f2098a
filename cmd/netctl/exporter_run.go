//go:build !netctl_split

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/exporter"
	"github.com/netctl/netctl/stats"
)

// exporterAction serves the exporter (exporter.go has the command). The
// netctl_split build has none: it runs netctl-full instead (full_split.go).
func exporterAction(c *cli.Context) error {
	const path = "netctl exporter"
	st := c.Duration("scrape-timeout")
	if st < time.Second || st > 5*time.Minute {
		return usageErr(path, "--scrape-timeout %s: out of range: use 1s to 5m", st)
	}
	rs := c.Duration("ring-sample")
	if rs != 0 && (rs < 10*time.Millisecond || rs > 10*time.Second) {
		return usageErr(path, "--ring-sample %s: out of range: use 10ms to 10s, or 0", rs)
	}
	if g := c.Duration("gone-for"); g <= 0 {
		return usageErr(path, "--gone-for %s: use a positive duration", g)
	}
	var qmps []string
	for _, q := range c.StringSlice("qmp") {
		abs, err := filepath.Abs(q)
		if err != nil {
			return usageErr(path, "--qmp %s: %v", q, err)
		}
		if fi, err := os.Stat(abs); err == nil && fi.Mode()&os.ModeSocket == 0 {
			return usageErr(path, "--qmp %s is not a socket: name QEMU's QMP socket", q)
		}
		qmps = append(qmps, abs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := exporter.Listen(ctx, c.String("listen"), c.Bool("allow-remote"))
	if err != nil {
		return err
	}
	col := stats.NewCollector(stats.Options{Deadline: st, LibvirtMonitor: c.Bool("qemu-monitor")})
	if rs > 0 {
		// Between scrapes (process_vm_readv only: no QMP, no fd).
		go col.SampleEvery(ctx, rs)
	}
	vms, domains := []string{}, c.StringSlice("domain")
	for _, vm := range c.StringSlice("vm") {
		if runByLibvirt(vm) {
			domains = append(domains, vm)
		} else {
			vms = append(vms, vm)
		}
	}
	src := &exporter.StatsSource{StateDir: runDir(), VMs: vms, QMPs: qmps, Domains: domains, LibvirtURI: c.String("libvirt"), Collector: col}
	e := exporter.New(src, exporter.Options{ScrapeTimeout: st, GoneFor: c.Duration("gone-for")})
	fmt.Fprintf(c.App.ErrWriter, "netctl exporter: serving http://%s/metrics\n", ln.Addr())
	return exporter.Serve(ctx, ln, e.Handler())
}
