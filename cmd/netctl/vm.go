package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/qemuproc"
)

// vmMonitor is one monitor in netctl vm list's output.
type vmMonitor struct {
	qemuproc.Monitor
	State  qemuproc.State `json:"state"`
	Detail string         `json:"detail,omitempty"`
}

// vmEntry is one QEMU in netctl vm list's output.
type vmEntry struct {
	PID       int         `json:"pid"`
	StartTime uint64      `json:"starttime"`
	Name      string      `json:"name"`
	Binary    string      `json:"binary"`
	Monitors  []vmMonitor `json:"monitors"`
	Truncated bool        `json:"truncated,omitempty"`
}

func vmCommand() *cli.Command {
	return &cli.Command{
		Name:  "vm",
		Usage: "the QEMU processes netctl can attach to",
		Subcommands: []*cli.Command{{
			Name:      "list",
			ArgsUsage: "[NAME...]",
			Usage: "list running QEMUs (qemu-system-*, qemu-kvm), or those with -name NAME: pid, name and each QMP monitor, " +
				"whether netctl can reach it, another client holds it (QEMU serves one per monitor) or it is libvirt's",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: `print JSON: {"vms": [{"pid", "name", "monitors": [{"socket", "state", ...}]}]}`},
				&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long (each busy monitor takes up to " + qemuproc.GreetingTimeout.String() + ")"},
			},
			Action: func(c *cli.Context) error {
				if c.Duration("timeout") <= 0 {
					return usageErr("netctl vm list", "--timeout %v: use a positive duration", c.Duration("timeout"))
				}
				ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
				defer cancel()
				vms, err := qemuproc.List()
				if err != nil {
					return err
				}
				vms, err = onlyNamed(vms, c.Args().Slice())
				if err != nil {
					return err
				}
				out := make([]vmEntry, 0, len(vms))
				for _, vm := range vms {
					e := vmEntry{PID: vm.PID, StartTime: vm.StartTime, Name: vm.Name, Binary: vm.Binary, Truncated: vm.Truncated,
						Monitors: make([]vmMonitor, 0, len(vm.Monitors))}
					for _, m := range vm.Monitors {
						st, detail := qemuproc.Check(ctx, vm, m)
						e.Monitors = append(e.Monitors, vmMonitor{Monitor: m, State: st, Detail: detail})
					}
					out = append(out, e)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, struct {
						VMs []vmEntry `json:"vms"`
					}{out})
				}
				printVMs(c.App.Writer, out)
				return nil
			},
		}},
	}
}

// onlyNamed keeps the VMs whose -name is one of names (all when names is
// empty); a name no VM has is an error.
func onlyNamed(vms []qemuproc.VM, names []string) ([]qemuproc.VM, error) {
	if len(names) == 0 {
		return vms, nil
	}
	var kept []qemuproc.VM
	for _, n := range names {
		found := false
		for _, vm := range vms {
			if vm.Name == n {
				kept = append(kept, vm)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no VM named %q: run 'netctl vm list' to see the running ones: %w", n, qemuproc.ErrNoVM)
		}
	}
	return kept, nil
}

func printVMs(w io.Writer, vms []vmEntry) {
	if len(vms) == 0 {
		fmt.Fprintln(w, "no QEMU (qemu-system-*, qemu-kvm) is running")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tNAME\tMONITOR\tSTATE")
	for _, vm := range vms {
		name := termSafe(vm.Name) // QEMU's -name: anyone's text
		if name == "" {
			name = "-"
		}
		if len(vm.Monitors) == 0 {
			fmt.Fprintf(tw, "%d\t%s\t-\tno QMP monitor (add -qmp unix:PATH,server=on,wait=off)\n", vm.PID, name)
		}
		for _, m := range vm.Monitors {
			state := string(m.State)
			if m.Detail != "" {
				state += ": " + m.Detail
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", vm.PID, name, termSafe(m.Monitor.String()), termSafe(state))
		}
	}
	tw.Flush()
}
