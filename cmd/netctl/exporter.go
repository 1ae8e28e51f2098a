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
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/stats"
)

func exporterCommand() *cli.Command {
	const path = "netctl exporter"
	return &cli.Command{
		Name:  "exporter",
		Usage: "serve Prometheus metrics of every NIC netctl attached (and of --vm/--qmp VMs' NICs), sampled on each scrape",
		Description: "Each scrape of /metrics lists the NICs afresh (netctl's state, plus each --vm and --qmp VM's virtio-net NICs),\n" +
			"samples them under --scrape-timeout and answers; no QMP connection stays open between scrapes. A VM that is\n" +
			"gone or busy costs only its NICs (netctl_nic_up 0, netctl_source_missing_info says why). /healthz says the\n" +
			"exporter runs. It listens on loopback only unless --allow-remote: the metrics name VMs, NICs and sockets, and\n" +
			"it has no TLS or authentication.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9465", Usage: "HOST:PORT to serve on"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow a --listen address that is not loopback"},
			&cli.StringSliceFlag{Name: "vm", Usage: "also this VM's NICs, by QEMU's -name (repeatable)"},
			&cli.StringSliceFlag{Name: "qmp", Usage: "also the NICs of the QEMU on this QMP socket (repeatable)"},
			&cli.StringSliceFlag{Name: "domain", Usage: "also this libvirt domain's NICs (name or UUID, repeatable), through libvirt's API; a --vm whose monitor libvirt holds is one"},
			&cli.StringFlag{Name: "libvirt", Value: libvirtdom.DefaultURI, Usage: "the libvirt connection of --domain"},
			&cli.BoolFlag{Name: "qemu-monitor", Usage: "for libvirt domains' NICs: also count the rings, asking QEMU through libvirt's monitor passthrough at each scrape; libvirt then marks those domains \"tainted: custom-monitor\""},
			&cli.DurationFlag{Name: "scrape-timeout", Value: 5 * time.Second, Usage: "bound on one scrape (1s to 5m); Prometheus's own scrape timeout lowers it"},
			&cli.DurationFlag{Name: "ring-sample", Value: 100 * time.Millisecond, Usage: "read the rings' 16-bit indices this often between scrapes, so that no wrap is missed: a ring is followed up to 32768 descriptors per this interval (10ms to 10s; 0: only at scrapes)"},
			&cli.DurationFlag{Name: "gone-for", Value: 5 * time.Minute, Usage: "how long a NIC no longer listed stays in the output with netctl_nic_up 0"},
		},
		Action: func(c *cli.Context) error {
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
		},
	}
}
