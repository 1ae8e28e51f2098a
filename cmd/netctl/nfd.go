package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/nfd"
	"github.com/netctl/netctl/policy/probe"
)

// nfdDefaultExpiry is how long written labels last without a refresh.
const nfdDefaultExpiry = time.Hour

// nfdMaxEvery bounds --every: the expiry is raised to 3 times it, which
// must not overflow (it would go negative and leave the hour's expiry,
// the labels gone between refreshes).
const nfdMaxEvery = 365 * 24 * time.Hour

func nfdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dir", Value: nfd.DefaultDir, Usage: "NFD's local feature directory (nfd-worker's features.d; in a pod, where its hostPath is mounted)"},
		&cli.StringFlag{Name: "qemu", Usage: "the QEMU version the VMs run (KubeVirt's virt-launcher's, e.g. 9.1.0): the featureset is computed for it (default: unknown, the kernel alone decides)"},
		&cli.DurationFlag{Name: "expiry", Value: nfdDefaultExpiry, Usage: "the labels expire this long after a write unless refreshed (# +expiry-time=; 0: never; with --every at least 3 times it)"},
	}
}

func nfdCommand() *cli.Command {
	return &cli.Command{
		Name:  "nfd",
		Usage: "node labels for Kubernetes' Node Feature Discovery: what this node offers, and its migration pool (featureset)",
		Description: "netctl nfd write probes this node and writes NFD's local feature file (" + nfd.DefaultDir + "/" + nfd.FileName + "),\n" +
			"which nfd-worker turns into node labels: netctl.dev/vhost-net, netctl.dev/vdpa, netctl.dev/vdpa-mgmtdev.NAME,\n" +
			"netctl.dev/tap-uso, netctl.dev/zerocopy and netctl.dev/featureset=fs-HEX (the set netctl plan would offer on this\n" +
			"node alone: equal on nodes that can carry the same set; a VM's node affinity on it keeps its migrations in a\n" +
			"compatible pool). Example: netctl nfd write --every 5m (a DaemonSet), or netctl nfd write from a systemd timer.",
		Subcommands: []*cli.Command{
			{
				Name:  "write",
				Usage: "probe this node and write the feature file (atomically: a dot-file renamed over it)",
				Flags: append(nfdFlags(),
					&cli.DurationFlag{Name: "every", Usage: "keep running and rewrite it this often (a DaemonSet's loop; SIGTERM ends it)"},
				),
				Action: func(c *cli.Context) error {
					every, expiry := c.Duration("every"), c.Duration("expiry")
					if every < 0 || (every > 0 && every < time.Second) || every > nfdMaxEvery {
						return usageErr("netctl nfd write", "--every %s: use 0 (once), or a second to %s", every, nfdMaxEvery)
					}
					if expiry < 0 {
						return usageErr("netctl nfd write", "--expiry %s: use 0 (never) or a positive duration", expiry)
					}
					if every > 0 && expiry > 0 && expiry < 3*every {
						expiry = 3 * every
					}
					if err := nfdDir(c, "netctl nfd write"); err != nil {
						return err // before the loop: it would fail the same at every refresh
					}
					opts := nfd.Options{QEMU: c.String("qemu")}
					if every == 0 {
						return nfdWrite(c.App.Writer, c.String("dir"), opts, expiry)
					}
					ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
					defer stop()
					t := time.NewTicker(every)
					defer t.Stop()
					for {
						if err := nfdWrite(c.App.Writer, c.String("dir"), opts, expiry); err != nil {
							fmt.Fprintf(c.App.ErrWriter, "netctl nfd write: %v (retrying in %s)\n", err, every)
						}
						select {
						case <-ctx.Done():
							return nil
						case <-t.C:
						}
					}
				},
			},
			{
				Name:  "show",
				Usage: "print the labels netctl nfd write would write, and why any is left out",
				Flags: nfdFlags()[1:2],
				Action: func(c *cli.Context) error {
					labels, notes, err := nfdLabels(nfd.Options{QEMU: c.String("qemu")})
					if err != nil {
						return err
					}
					for _, l := range labels {
						fmt.Fprintln(c.App.Writer, l)
					}
					for _, n := range notes {
						fmt.Fprintf(c.App.Writer, "# note: %s\n", n)
					}
					return nil
				},
			},
			{
				Name:  "remove",
				Usage: "delete the feature file (NFD drops netctl's labels at its next discovery)",
				Flags: nfdFlags()[:1],
				Action: func(c *cli.Context) error {
					if err := nfdDir(c, "netctl nfd remove"); err != nil {
						return err
					}
					return nfd.Remove(c.String("dir"))
				},
			},
		},
	}
}

// nfdDir checks --dir: an absolute path (a relative one would name a
// directory of wherever netctl was started).
func nfdDir(c *cli.Context, path string) error {
	if d := c.String("dir"); !filepath.IsAbs(d) {
		return usageErr(path, "--dir %q: give an absolute path (NFD's is %s)", d, nfd.DefaultDir)
	}
	return nil
}

func nfdLabels(o nfd.Options) ([]nfd.Label, []string, error) {
	h, err := probe.ProbeFull(nil)
	if err != nil && !errors.Is(err, probe.ErrInvalid) {
		return nil, nil, err
	}
	if h == nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	return nfd.Labels(h, o)
}

// nfdWrite probes and writes the feature file once, saying what it wrote.
func nfdWrite(w io.Writer, dir string, o nfd.Options, expiry time.Duration) error {
	h, err := probe.ProbeFull(nil)
	if err != nil && !errors.Is(err, probe.ErrInvalid) {
		return err
	}
	if h == nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nfdWriteProbe(w, h, dir, o, expiry)
}

// nfdWriteProbe writes the feature file for probe h.
func nfdWriteProbe(w io.Writer, h *probe.Result, dir string, o nfd.Options, expiry time.Duration) error {
	labels, notes, err := nfd.Labels(h, o)
	if err != nil {
		return err
	}
	now := time.Now()
	var exp time.Time
	if expiry > 0 {
		exp = now.Add(expiry)
	}
	b, err := nfd.Render(labels, exp, now)
	if err != nil {
		return err
	}
	if err := nfd.Write(dir, b); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %d labels to %s/%s", len(labels), dir, nfd.FileName)
	if !exp.IsZero() {
		fmt.Fprintf(w, " (expire %s)", exp.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
