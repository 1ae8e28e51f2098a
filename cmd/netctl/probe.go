package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/policy/probe"
)

func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "show what this host's kernel offers: vhost-net, tap offloads, macvtap, vDPA, zero-copy",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "dev", Usage: "also read the ethtool features of this device (repeatable)"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			r, err := probe.Probe(c.StringSlice("dev"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, r)
			}
			printProbe(c.App.Writer, r)
			return nil
		},
	}
}

func yesNo(ok bool, why string) string {
	if ok {
		return "yes"
	}
	if why == "" {
		return "no"
	}
	return "no: " + why
}

func printProbe(w io.Writer, r *probe.Result) {
	fmt.Fprintf(w, "kernel:      %s\n", r.Kernel)
	fmt.Fprintf(w, "vhost-net:   %s\n", yesNo(r.VhostNet.Available, r.VhostNet.Error))
	if r.VhostNet.Available {
		fmt.Fprintf(w, "  features:  %s (%s)\n", strings.Join(r.VhostNet.Features, "|"), r.VhostNet.FeaturesHex)
		fmt.Fprintf(w, "  max_mem_regions %d, busy-poll %v, fork-from-owner control %v\n",
			r.VhostNet.MaxMemRegions, r.VhostNet.BusyPoll, r.VhostNet.ForkFromOwner)
	}
	fmt.Fprintf(w, "tap:         %s\n", yesNo(r.Tap.Available, r.Tap.Error))
	if r.Tap.Available {
		fmt.Fprintf(w, "  offloads:  %s\n", strings.Join(r.Tap.Offloads, " "))
	}
	fmt.Fprintf(w, "macvtap:     %s\n", yesNo(r.Macvtap.Available, r.Macvtap.Error))
	if r.Macvtap.Available {
		fmt.Fprintf(w, "  offloads:  %s\n", strings.Join(r.Macvtap.Offloads, " "))
	}
	fmt.Fprintf(w, "vdpa:        %s\n", yesNo(r.VDPA.Available, r.VDPA.Error))
	if r.VDPA.Available {
		fmt.Fprintf(w, "  mgmtdevs:  %s\n", strings.Join(r.VDPA.MgmtDevs, " "))
		for _, d := range r.VDPA.Devices {
			fmt.Fprintf(w, "  device %s bound to %s\n", d.Name, d.Driver)
		}
	}
	fmt.Fprintf(w, "zero-copy:   %s\n", yesNo(r.ZeroCopy.Enabled, r.ZeroCopy.Advice))
	for d, feats := range r.Devices {
		var on []string
		for n, v := range feats {
			if v {
				on = append(on, n)
			}
		}
		fmt.Fprintf(w, "device %s: %s\n", d, strings.Join(on, " "))
	}
}
