package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/vhostnet/selftest"
)

func selftestCommand() *cli.Command {
	return &cli.Command{
		Name:  "selftest",
		Usage: "set up a vhost-net NIC on this host and pass traffic through it",
		Description: "Creates a throwaway tap in a private network namespace, sets up one vhost-net device per\n" +
			"queue pair with netctl's built-in userspace virtio-net driver as the guest, passes frames both\n" +
			"ways, and prints what was negotiated and what moved. Needs root and /dev/vhost-net.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "queues", Value: 1, Usage: "queue pairs (1 to 16)"},
			&cli.IntFlag{Name: "frames", Value: 2000, Usage: "frames per direction and queue"},
			&cli.IntFlag{Name: "frame-size", Value: 1514, Usage: "Ethernet frame size in bytes"},
			&cli.DurationFlag{Name: "timeout", Value: 0, Usage: "give up after this long (default 60s)"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			rep, err := selftest.Run(c.Context, selftest.Options{Queues: c.Int("queues"), Frames: c.Int("frames"),
				FrameSize: c.Int("frame-size"), Timeout: c.Duration("timeout")})
			if rep != nil {
				if c.Bool("json") {
					b, _ := json.MarshalIndent(rep, "", "  ")
					fmt.Fprintln(c.App.Writer, string(b))
				} else {
					printSelftest(c.App.Writer, rep)
				}
			}
			if err != nil {
				return err
			}
			if !c.Bool("json") {
				fmt.Fprintln(c.App.Writer, "result: ok, vhost-net carried traffic both ways on every queue")
			}
			return nil
		},
	}
}

func printSelftest(w io.Writer, r *selftest.Report) {
	fmt.Fprintf(w, "netctl selftest: vhost-net on Linux %s, %d queue pair(s) over tap %s (private network namespace)\n",
		r.Kernel, len(r.Queues), r.Tap)
	fmt.Fprintf(w, "  vhost-net offers:   %s (%s)\n", strings.Join(r.OfferedNames, "|"), r.OfferedHex)
	fmt.Fprintf(w, "  acknowledged:       %s\n", strings.Join(r.AckedNames, "|"))
	fmt.Fprintf(w, "  virtio-net header:  %d bytes (VERSION_1)\n", r.HeaderSize)
	fmt.Fprintf(w, "  tap offloads:       %s\n", strings.Join(r.TapOffloads, " "))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\tguest sent\thost got\tbytes\thost→guest pkts\tbytes\tkicks\tinterrupts\t")
	var t selftest.QueueStats
	for _, q := range r.Queues {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", q.Queue, q.TXSent, q.TXPackets, q.TXBytes, q.RXPackets, q.RXBytes, q.Kicks, q.Interrupts)
		t.TXSent += q.TXSent
		t.TXPackets += q.TXPackets
		t.TXBytes += q.TXBytes
		t.RXPackets += q.RXPackets
		t.RXBytes += q.RXBytes
		t.Kicks += q.Kicks
		t.Interrupts += q.Interrupts
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.TXSent, t.TXPackets, t.TXBytes, t.RXPackets, t.RXBytes, t.Kicks, t.Interrupts)
	tw.Flush()
	fmt.Fprintf(w, "  throughput:         guest→host %.1f Mbit/s in %.2fs, host→guest %.1f Mbit/s in %.2fs\n",
		r.TXMbps, r.TXSeconds, r.RXMbps, r.RXSeconds)
	if t.TXPackets < t.TXSent {
		fmt.Fprintf(w, "  (%d of %d guest frames were dropped on the host side: the tap's backlog or the test's\n"+
			"   packet socket could not keep up; vhost-net itself sent them all)\n", t.TXSent-t.TXPackets, t.TXSent)
	}
}
