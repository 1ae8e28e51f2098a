package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/libvirtdom"
)

func exporterCommand() *cli.Command {
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
		Action: exporterAction,
	}
}
