package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/probe"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "the features safe to offer on every listed host (for live migration), from their netctl probe -j output",
		ArgsUsage: "HOST.json...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Value: policy.Throughput, Usage: "throughput, latency or compat"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() == 0 {
				return fmt.Errorf("plan: name the probe files of the hosts (netctl probe -j > HOST.json on each)")
			}
			hosts := map[string]*probe.Result{}
			for _, f := range c.Args().Slice() {
				b, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("plan: %w", err)
				}
				var r probe.Result
				if err := json.Unmarshal(b, &r); err != nil {
					return fmt.Errorf("plan: %s is not netctl probe -j output: %w", f, err)
				}
				hosts[strings.TrimSuffix(filepath.Base(f), ".json")] = &r
			}
			p, err := policy.Plan(hosts, policy.Request{Profile: c.String("profile")})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, p)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "safe on all %d hosts: %s\n", len(hosts), strings.Join(p.Offer, " "))
			for _, d := range p.Differences {
				var on []string
				for h, why := range d.Missing {
					on = append(on, fmt.Sprintf("%s (%s)", h, why))
				}
				sort.Strings(on)
				fmt.Fprintf(w, "dropped %s: missing on %s\n", d.Feature, strings.Join(on, ", "))
			}
			if len(p.QEMU) > 0 {
				var props []string
				for k, v := range p.QEMU {
					props = append(props, k+"="+v)
				}
				sort.Strings(props)
				fmt.Fprintf(w, "QEMU virtio-net-pci properties: %s\n", strings.Join(props, ","))
			}
			return nil
		},
	}
}
