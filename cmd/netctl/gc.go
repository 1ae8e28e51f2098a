package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/attach"
)

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "clean up after VMs that are gone: delete what netctl created for NICs whose QEMU exited or no longer has them, and their records",
		Description: "A record is collected when its QEMU has exited (pid and start time no longer match) or when the running QEMU has\n" +
			"neither the NIC's device nor its netdev. gc deletes what netctl created for it (a macvtap, a tap still there, a vdpa\n" +
			"device), never what it only opened (--tap, --vdpa), and removes the record; a running VM's NICs are left alone.\n" +
			"A record still 'attaching' is an attach that was killed: gc undoes what it names (in QEMU and on the host).\n" +
			"Lock files of VMs that are gone, and hook locks of domains the hook has no record of, are removed when nobody\n" +
			"holds them. --dry-run says what gc would do.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "say what would be done; change nothing"},
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.Duration("timeout") <= 0 {
				return usageErr("netctl gc", "--timeout %s: use a positive duration", c.Duration("timeout"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
			defer cancel()
			res, err := attach.GC(ctx, attach.GCRequest{StateDir: runDir(), DryRun: c.Bool("dry-run")})
			if res == nil {
				return err
			}
			if c.Bool("json") {
				if perr := printJSON(c.App.Writer, res); perr != nil {
					return perr
				}
				if err != nil {
					return &jsonReported{err}
				}
			} else {
				printGC(c.App.Writer, res, c.Bool("dry-run"))
			}
			return err
		},
	}
}

// printGC says per record and per lock file what gc did.
func printGC(w io.Writer, res *attach.GCResult, dry bool) {
	for _, u := range res.Unreadable {
		fmt.Fprintf(w, "unreadable record, left alone: %s\n", u)
	}
	collected := 0
	for _, n := range res.NICs {
		what := n.Action
		switch n.Action {
		case attach.GCRemoved, attach.GCWouldRemove:
			collected++
			what += ": " + strings.Join(n.Done, ", ")
		case attach.GCFailed:
			what += ": " + n.Error
			if len(n.Done) > 0 {
				what += " (done: " + strings.Join(n.Done, ", ") + ")"
			}
		}
		fmt.Fprintf(w, "%s on %s: %s (%s)\n", n.ID, vmOrSocket(n.VM, n.QMP), what, n.Why)
	}
	locks := 0
	for _, l := range res.Locks {
		if l.Action == attach.GCKept {
			continue
		}
		locks++
		fmt.Fprintf(w, "lock %s: %s (%s)\n", l.File, l.Action, l.Why)
	}
	switch {
	case len(res.NICs) == 0 && locks == 0 && len(res.Unreadable) == 0:
		fmt.Fprintln(w, "nothing to collect: netctl has no records and no stale lock files")
	case collected == 0 && locks == 0:
		fmt.Fprintln(w, "nothing to collect")
	case dry:
		fmt.Fprintf(w, "dry run: %d record(s) and %d lock file(s) would go; nothing was changed\n", collected, locks)
	}
}

func vmOrSocket(vm, sock string) string {
	if vm != "" {
		return vm
	}
	return sock
}
