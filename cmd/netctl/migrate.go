package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/migrate"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "move a hand-run QEMU's netctl NICs with the VM in a live migration (libvirt domains: the hook does it)",
		Description: "On the source: netctl migrate export --vm SRC > nics.json\n" +
			"On the destination, QEMU started as the source was plus -incoming defer:\n" +
			"  netctl migrate incoming --vm DST --from nics.json [--plan POOL.json]\n" +
			"then migrate-incoming on the destination and migrate on the source (QMP), and when QEMU says completed:\n" +
			"  netctl migrate finish --vm DST   (announce-self)\n" +
			"  netctl migrate finish --vm SRC   (quits the source QEMU, removes what netctl made for it)",
		Subcommands: []*cli.Command{migrateExportCommand(), migrateIncomingCommand(), migrateFinishCommand()},
	}
}

func migrateExportCommand() *cli.Command {
	const path = "netctl migrate export"
	return &cli.Command{
		Name:      "export",
		Usage:     "describe the VM's netctl NICs (ids, MACs, queues, PCI slots, offered and negotiated features) for the destination, as JSON",
		UsageText: "netctl migrate export --vm guest1 > nics.json",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to this file instead of stdout"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long"}),
		Action: func(c *cli.Context) error {
			ctx, interrupted, stop := interruptible(c.Duration("timeout"))
			defer stop()
			tg, err := target(ctx, c, path)
			if err != nil {
				return interruptedErr("migrate", interrupted, err)
			}
			m, err := migrate.Export(ctx, migrate.ExportRequest{QMP: tg.Sock, VMName: tg.Name, StateDir: runDir()})
			if err != nil {
				return commandError(path, interruptedErr("migrate", interrupted, err))
			}
			if o := c.String("output"); o != "" {
				f, err := os.OpenFile(o, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return fmt.Errorf("migrate export: %w", err)
				}
				if err := printJSON(f, m); err != nil {
					f.Close()
					return fmt.Errorf("migrate export: %w", err)
				}
				return f.Close()
			}
			return printJSON(c.App.Writer, m)
		},
	}
}

func migrateIncomingCommand() *cli.Command {
	const path = "netctl migrate incoming"
	return &cli.Command{
		Name:      "incoming",
		Usage:     "re-create the source's NICs in a QEMU started with -incoming defer, before migrate-incoming",
		UsageText: "netctl migrate incoming --vm guest1-dst --from nics.json --plan pool.json",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "from", Usage: "the source's netctl migrate export", Required: true},
			planFlag,
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"}),
		Action: func(c *cli.Context) error {
			b, err := readCapped(c.String("from"), migrate.MaxManifest)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return fmt.Errorf("migrate incoming: --from: %w", err)
			} else if err != nil {
				return usageErr(path, "--from: %v", err)
			}
			m, err := migrate.Parse(b)
			if err != nil {
				return usageErr(path, "--from %s: %v", c.String("from"), err)
			}
			pool, err := readPool(path, c.String("plan"))
			if err != nil {
				return err
			}
			ctx, interrupted, stop := interruptible(c.Duration("timeout"))
			defer stop()
			tg, err := target(ctx, c, path)
			if err != nil {
				return interruptedErr("migrate", interrupted, err)
			}
			nics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: tg.Sock, VMName: tg.Name, QEMUPID: tg.PID, QEMUStart: tg.Start,
				Manifest: m, Pool: pool, StateDir: runDir()})
			for _, n := range nics {
				printAttached(c.App.Writer, n)
			}
			if err != nil {
				return commandError(path, interruptedErr("migrate", interrupted, err))
			}
			fmt.Fprintf(c.App.Writer, "ready: %d NIC(s) wait for the guest; run migrate-incoming here and migrate on the source\n", len(nics))
			return nil
		},
	}
}

func migrateFinishCommand() *cli.Command {
	const path = "netctl migrate finish"
	return &cli.Command{
		Name:      "finish",
		Usage:     "after QEMU migrated: on the destination announce the NICs' MACs (announce-self); on the source quit QEMU and remove what netctl made for it",
		UsageText: "netctl migrate finish --vm guest1-dst; netctl migrate finish --vm guest1",
		Flags: append(targetFlags(),
			&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for an incoming migration to arrive, or the source QEMU to exit"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"}),
		Action: func(c *cli.Context) error {
			if c.Duration("wait") <= 0 {
				return usageErr(path, "--wait %s: use a positive duration", c.Duration("wait"))
			}
			ctx, interrupted, stop := interruptible(c.Duration("wait") + 30*time.Second)
			defer stop()
			tg, err := target(ctx, c, path)
			if err != nil {
				return interruptedErr("migrate", interrupted, err)
			}
			f, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: tg.Sock, VMName: tg.Name, StateDir: runDir(), Wait: c.Duration("wait")})
			if err != nil {
				return commandError(path, interruptedErr("migrate", interrupted, err))
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, f)
			}
			if f.Side == "destination" {
				fmt.Fprintf(c.App.Writer, "%s: destination: announced %s\n", f.VM, strings.Join(f.Announced, " "))
			} else {
				fmt.Fprintf(c.App.Writer, "%s: source: QEMU quit; removed %s\n", f.VM, strings.Join(f.Removed, " "))
			}
			return nil
		},
	}
}
