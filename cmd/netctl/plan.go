package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "the features safe to offer on every listed host (for live migration), from their netctl probe -j output",
		ArgsUsage: "HOST.json...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Value: policy.Throughput, Usage: "throughput, latency or compat"},
			&cli.StringFlag{Name: "qemu", Usage: "QEMU version to assume on hosts whose probe found no QEMU (e.g. 8.2.2)"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			hosts, err := readProbes(c.Args().Slice())
			if err != nil {
				return err
			}
			p, err := policy.Plan(hosts, policy.Request{Profile: c.String("profile"), QEMU: c.String("qemu")})
			if errors.Is(err, policy.ErrInvalid) {
				return usage("plan: %w", err)
			} else if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, p)
			}
			printPlan(c.App.Writer, p)
			return nil
		},
	}
}

// readProbes reads and checks the probe files; any bad file, no file, or
// two files of one host is a usage error; a file that cannot be opened is
// a plain failure.
func readProbes(files []string) ([]*host.Description, error) {
	if len(files) == 0 {
		return nil, usage("plan: name the probe files of the hosts (netctl probe -j > HOST.json on each)")
	}
	if len(files) > policy.MaxHosts {
		return nil, usage("plan: %d files: name 1 to %d hosts", len(files), policy.MaxHosts)
	}
	var hosts []*host.Description
	fileOf := map[string]string{}
	for _, f := range files {
		b, err := readCapped(f, host.MaxDocument)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("plan: %w", err) // the file is not there to read: a failure (exit 1), like diagnose --from
		} else if err != nil {
			return nil, usage("plan: %w", err)
		}
		h, err := host.Parse(b)
		if err != nil {
			return nil, usage("plan: %s: %w", f, err)
		}
		if prev, dup := fileOf[h.Hostname]; dup {
			return nil, usage("plan: %s and %s are both probes of host %s: give each host once", prev, f, h.Hostname)
		}
		fileOf[h.Hostname] = f
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// readCapped reads a file of at most max bytes.
func readCapped(name string, max int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: more than %d bytes, so not a probe document", name, max)
	}
	return b, nil
}

func printPlan(w io.Writer, p policy.PlanResult) {
	fmt.Fprintf(w, "safe on all %d hosts (%s): %s\n", len(p.Hosts), strings.Join(p.Hosts, " "), strings.Join(p.Offer, " "))
	fmt.Fprintf(w, "feature set: %s (netctl plan -j > POOL.json; netctl attach --plan POOL.json pins it)\n", p.ID)
	for _, h := range p.Hosts {
		fmt.Fprintf(w, "backend on %s: %s\n", h, p.Backends[h])
	}
	for _, d := range p.Differences {
		var on []string
		for h, why := range d.Missing {
			on = append(on, fmt.Sprintf("%s (%s)", h, why))
		}
		sort.Strings(on)
		if why, same := sameReason(d.Missing); same && len(d.Missing) == len(p.Hosts) {
			// No host offers it (a managed bit: its property is still
			// set), all for one reason: say it once.
			on = []string{fmt.Sprintf("all %d hosts (%s)", len(p.Hosts), why)}
			if len(p.Hosts) == 1 {
				on = []string{fmt.Sprintf("%s (%s)", p.Hosts[0], why)}
			}
		}
		switch {
		case len(on) > 0 && d.Reason != "":
			fmt.Fprintf(w, "dropped %s: missing on %s; %s\n", d.Feature, strings.Join(on, ", "), d.Reason)
		case len(on) > 0:
			fmt.Fprintf(w, "dropped %s: missing on %s\n", d.Feature, strings.Join(on, ", "))
		default:
			fmt.Fprintf(w, "dropped %s: %s\n", d.Feature, d.Reason)
		}
	}
	if len(p.QEMU) > 0 {
		fmt.Fprintf(w, "QEMU virtio-net-pci properties: %s\n", props(p.QEMU))
	}
	hosts := make([]string, 0, len(p.QEMUByHost))
	for h := range p.QEMUByHost {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		fmt.Fprintf(w, "  and on %s only: %s\n", h, props(p.QEMUByHost[h]))
	}
	if p.Libvirt.Driver != "" && p.Libvirt.Driver != "<driver/>" {
		fmt.Fprintf(w, "libvirt <interface>: %s\n", p.Libvirt.Driver)
	}
	if p.Libvirt.OverrideXML != "" {
		fmt.Fprintf(w, "libvirt (no <driver> attribute; 8.2+, per interface alias): %s\n", p.Libvirt.OverrideXML)
	}
	for _, k := range sortedKeys(p.Unavailable) {
		fmt.Fprintf(w, "not emitted: %s: %s\n", k, p.Unavailable[k])
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// sameReason is the one reason every host in missing gives, if they
// give one.
func sameReason(missing map[string]string) (string, bool) {
	why, first := "", true
	for _, w := range missing {
		if !first && w != why {
			return "", false
		}
		why, first = w, false
	}
	return why, !first
}

func props(m map[string]string) string {
	var s []string
	for _, k := range sortedKeys(m) {
		s = append(s, k+"="+m[k])
	}
	return strings.Join(s, ",")
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// planFlag is --plan FILE: pin a NIC to a pool's plan.
var planFlag = &cli.StringFlag{Name: "plan", Usage: "pin the NIC to a pool's plan (netctl plan -j HOST.json... > POOL.json): nothing outside the features every host of the pool carries is offered, so the VM can live-migrate among them"}

// readPool reads --plan's file; "" is no pool. A bad file is a usage
// error naming it.
func readPool(path, name string) (*policy.Pool, error) {
	if name == "" {
		return nil, nil
	}
	b, err := readCapped(name, policy.MaxPlanFile)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%s: --plan: %w", strings.TrimPrefix(path, "netctl "), err)
	} else if err != nil {
		return nil, usageErr(path, "--plan: %v", err)
	}
	pool, err := policy.ParsePlanFile(b)
	if err != nil {
		return nil, usageErr(path, "--plan %s: %v", name, err)
	}
	return pool, nil
}
