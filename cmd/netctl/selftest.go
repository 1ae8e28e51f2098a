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
			"ways, checks every frame byte for byte, and prints what was negotiated, what the kernel reports\n" +
			"back and what moved. Any frame lost or corrupted fails the test. Needs root and /dev/vhost-net.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "queues", Value: 1, Usage: fmt.Sprintf("queue pairs (1 to %d)", selftest.MaxQueues)},
			&cli.IntFlag{Name: "frames", Value: 2000, Usage: fmt.Sprintf("frames per direction and queue (1 to %d)", selftest.MaxFrames)},
			&cli.IntFlag{Name: "frame-size", Value: 1514, Usage: fmt.Sprintf("Ethernet frame size in bytes (%d to %d)", selftest.MinFrameSize, selftest.MaxFrameSize)},
			&cli.DurationFlag{Name: "timeout", Value: 0, Usage: "give up after this long (default 60s)"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			o, err := selftestOptions(c)
			if err != nil {
				return err
			}
			rep, err := selftest.Run(c.Context, o)
			if rep != nil && c.Bool("json") {
				return printSelftestJSON(c.App.Writer, rep, err)
			}
			if rep != nil {
				printSelftest(c.App.Writer, rep)
			}
			if err != nil {
				return err
			}
			if !c.Bool("json") {
				fmt.Fprintln(c.App.Writer, "result: ok, every frame arrived once and byte for byte, both ways, on every queue")
			}
			return nil
		},
	}
}

// selftestOptions reads the flags and refuses values out of range with an
// error that wraps selftest.ErrInvalid (errs.ErrInvalid) and names the
// range. Zero is refused too: in selftest.Options it would mean "default".
func selftestOptions(c *cli.Context) (selftest.Options, error) {
	o := selftest.Options{Queues: c.Int("queues"), Frames: c.Int("frames"), FrameSize: c.Int("frame-size"), Timeout: c.Duration("timeout")}
	switch {
	case c.NArg() > 0:
		return o, fmt.Errorf("selftest: unexpected argument %q: %w: selftest takes only flags", c.Args().First(), selftest.ErrInvalid)
	case o.Queues < 1 || o.Queues > selftest.MaxQueues:
		return o, fmt.Errorf("selftest: --queues %d: %w: use 1 to %d", o.Queues, selftest.ErrInvalid, selftest.MaxQueues)
	case o.Frames < 1 || o.Frames > selftest.MaxFrames:
		return o, fmt.Errorf("selftest: --frames %d: %w: use 1 to %d", o.Frames, selftest.ErrInvalid, selftest.MaxFrames)
	case o.FrameSize < selftest.MinFrameSize || o.FrameSize > selftest.MaxFrameSize:
		return o, fmt.Errorf("selftest: --frame-size %d: %w: use %d to %d", o.FrameSize, selftest.ErrInvalid, selftest.MinFrameSize, selftest.MaxFrameSize)
	case o.Timeout < 0:
		return o, fmt.Errorf("selftest: --timeout %s: %w: use a positive duration", o.Timeout, selftest.ErrInvalid)
	}
	return o, nil
}

// printSelftestJSON prints the report as one JSON document. For a run
// that failed (err not nil) the document also holds "error" and "hint",
// as netctl's error object does, and the error returned is marked as
// reported in it, so stdout stays one document; the message still goes to
// stderr and the exit code is 1.
func printSelftestJSON(w io.Writer, rep *selftest.Report, err error) error {
	if err == nil {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(w, string(b))
		return nil
	}
	if !strings.HasPrefix(err.Error(), "selftest:") { // as commandError will put it
		err = fmt.Errorf("selftest: %w", err)
	}
	b, _ := json.MarshalIndent(struct {
		*selftest.Report
		Error string `json:"error"`
		Hint  string `json:"hint"`
	}{rep, err.Error(), hint(err)}, "", "  ")
	fmt.Fprintln(w, string(b))
	return &jsonReported{err}
}

func orNone(s []string, sep string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, sep)
}

func printSelftest(w io.Writer, r *selftest.Report) {
	fmt.Fprintf(w, "netctl selftest: vhost-net on Linux %s, %d queue pair(s) over tap %s (private network namespace)\n",
		r.Kernel, len(r.Queues), r.Tap)
	fmt.Fprintf(w, "  vhost-net offers:   %s (%s, VHOST_GET_FEATURES)\n", orNone(r.OfferedNames, "|"), r.OfferedHex)
	fmt.Fprintf(w, "  acknowledged:       %s (%s, accepted by VHOST_SET_FEATURES; vhost-net cannot report it back)\n", orNone(r.AckedNames, "|"), r.AckedHex)
	fmt.Fprintf(w, "  seen in effect:     %s\n", orNone(r.AckedInEffect, " "))
	fmt.Fprintf(w, "  virtio-net header:  %d bytes (TUNGETVNETHDRSZ); tap flags %s (TUNGETIFF)\n", r.HeaderSize, orNone(r.TapFlags, "|"))
	fmt.Fprintf(w, "  tap offloads:       %s (ethtool: %s)\n", orNone(r.TapOffloads, " "), orNone(r.TapFeatures, " "))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\tguest sent\thost got\tbytes\thost→guest got\tbytes\tkicks\tinterrupts\t")
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
	for _, d := range []struct {
		name string
		d    selftest.Direction
	}{{"guest→host", r.GuestToHost}, {"host→guest", r.HostToGuest}} {
		fmt.Fprintf(w, "  %s:  %d of %d frames intact (%d lost, %d corrupted, %d duplicated), %.1f Mbit/s in %.2fs\n",
			d.name, d.d.Received, d.d.Planned, d.d.Lost, d.d.Corrupted, d.d.Duplicate, d.d.Mbps, d.d.Seconds)
	}
}
