package main

import (
	"errors"
	"fmt"
	"github.com/netctl/netctl/nfd"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
)

func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "show what this host's kernel offers: vhost-net, tap offloads, macvtap, vDPA, zero-copy, QEMU (what cannot be read, e.g. without root, says why)",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "dev", Usage: "also read the ethtool features of this device (repeatable; shown in the order given)"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON (the document netctl plan reads)"},
			&cli.BoolFlag{Name: "nfd", Usage: "also write Node Feature Discovery's feature file (netctl nfd write, its defaults)"},
		},
		Action: func(c *cli.Context) error {
			r, err := probe.ProbeFull(c.StringSlice("dev"))
			if errors.Is(err, probe.ErrInvalid) {
				return usage("%w", err)
			} else if err != nil {
				return err
			}
			if c.Bool("nfd") {
				if err := nfdWriteProbe(c.App.ErrWriter, r, nfd.DefaultDir, nfd.Options{}, nfdDefaultExpiry); err != nil {
					return err
				}
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
	fmt.Fprintf(w, "host:        %s\n", r.Hostname)
	fmt.Fprintf(w, "kernel:      %s\n", r.Kernel)
	fmt.Fprintf(w, "vhost-net:   %s\n", yesNo(r.VhostNet.Available, r.VhostNet.Error))
	if r.VhostNet.Available {
		bp := "unknown (" + r.VhostNet.BusyPollError + ")"
		if r.VhostNet.BusyPoll != nil {
			bp = fmt.Sprint(*r.VhostNet.BusyPoll)
		}
		fmt.Fprintf(w, "  features:  %s (%s)\n", strings.Join(r.VhostNet.Features, "|"), r.VhostNet.FeaturesHex)
		fmt.Fprintf(w, "  max_mem_regions %d, busy-poll %s, fork-from-owner control %v\n",
			r.VhostNet.MaxMemRegions, bp, r.VhostNet.ForkFromOwner)
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
			fmt.Fprintf(w, "  device %s bound to %s, features %s", d.Name, d.Driver, strings.Join(d.Features, "|"))
			if d.Error != "" {
				fmt.Fprintf(w, " (%s)", d.Error)
			}
			fmt.Fprintln(w)
			if m := d.Migration; m != nil {
				fmt.Fprintf(w, "    migration: %s\n", migrationText(*m))
			}
		}
	}
	zc := yesNo(r.ZeroCopy.Enabled, r.ZeroCopy.Advice)
	if r.ZeroCopy.Error != "" {
		zc = "unknown: " + r.ZeroCopy.Error
	}
	fmt.Fprintf(w, "zero-copy:   %s\n", zc)
	if r.QEMU.Version != "" {
		fmt.Fprintf(w, "qemu:        %s (%s)\n", r.QEMU.Version, r.QEMU.Binary)
	} else {
		fmt.Fprintf(w, "qemu:        unknown: %s\n", r.QEMU.Error)
	}
	for _, d := range r.Devices {
		if d.Error != "" {
			fmt.Fprintf(w, "device %s: %s\n", d.Name, d.Error)
			continue
		}
		var on []string
		for n, v := range d.Features {
			if v {
				on = append(on, n)
			}
		}
		slices.Sort(on)
		fmt.Fprintf(w, "device %s: %s\n", d.Name, strings.Join(on, " "))
	}
}

// migrationText is a vdpa device's migration answer on one line: "yes[,
// suspends]: why", "no: why" or "unknown: why".
func migrationText(m host.VDPAMigration) string {
	switch {
	case m.OK && m.Suspend:
		return "yes, suspends: " + m.Reason
	case m.OK:
		return "yes: " + m.Reason
	case strings.HasPrefix(m.Reason, "unknown: "):
		return m.Reason
	}
	return yesNo(false, m.Reason)
}
