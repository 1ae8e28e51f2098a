package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/diagnose/gather"
	"github.com/netctl/netctl/qmp"
)

func diagnoseCommand() *cli.Command {
	const path = "netctl diagnose"
	return &cli.Command{
		Name:  "diagnose",
		Usage: "why is an offload on or off in a guest: every virtio-net feature bit of a running QEMU NIC, offered, acknowledged, honoured by the backend, with the reason",
		Description: "Live: netctl diagnose --qmp /run/vm.qmp [--id net0], for a QEMU started with -qmp unix:/run/vm.qmp,server=on,wait=off\n" +
			"(or --vm NAME, by QEMU's -name).\n" +
			"A libvirt domain: netctl diagnose --vm DOMAIN [--libvirt URI] reads what libvirt reports (the live XML: each\n" +
			"interface's type, target dev, MAC, <driver> and queues) and the tap on this host, and lists what only QEMU's monitor\n" +
			"knows; --qemu-monitor [--id ALIAS] asks QEMU for it through libvirt (virDomainQemuMonitorCommand) and explains every\n" +
			"feature bit, after which libvirt marks the domain \"tainted: custom-monitor\" (the output says so).\n" +
			"Offline: netctl diagnose --from SNAPSHOT.json, from an earlier --save.\n" +
			"libvirt keeps its QMP socket to itself; save QEMU's reply with virsh and name the tap:\n" +
			"  virsh qemu-monitor-command DOMAIN '{\"execute\":\"x-query-virtio-status\",\"arguments\":{\"path\":\"/machine/peripheral/net0/virtio-backend\"}}' > st.json\n" +
			"  netctl diagnose --from st.json --tap vnet0",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "qmp", Usage: "QEMU's QMP socket"},
			&cli.StringFlag{Name: "vm", Usage: "the VM by QEMU's -name, or a libvirt domain by name or UUID"},
			&cli.StringFlag{Name: "libvirt", Value: libvirtdom.DefaultURI, Usage: "with --vm: the libvirt connection of the domain; a VM whose monitor libvirt holds is a domain on the default URI"},
			&cli.BoolFlag{Name: "qemu-monitor", Usage: "for a libvirt domain: also ask QEMU (guest-acked features, vhost) through libvirt's monitor passthrough; libvirt then marks the domain \"tainted: custom-monitor\""},
			&cli.StringFlag{Name: "id", Usage: "the NIC's id (-device virtio-net-pci,...,id=ID); needed when QEMU has several"},
			&cli.StringFlag{Name: "lower", Usage: "also read this device's ethtool features (the uplink); a macvtap's link by default"},
			&cli.StringFlag{Name: "from", Usage: "explain a snapshot saved with --save instead of asking QEMU"},
			&cli.StringFlag{Name: "tap", Usage: "with --from a bare QMP reply: the NIC's tap or macvtap on this host"},
			&cli.StringFlag{Name: "save", Usage: "write what was read to this file (explain it later with --from)"},
			&cli.StringFlag{Name: "plan", Usage: "also say whether the NIC negotiated anything outside a pool's plan (netctl plan -j > POOL.json): what would make a live migration within the pool fail"},
			&cli.BoolFlag{Name: "no-probe", Usage: "do not probe the host's tun offloads (the reasons then name fewer kernel limits)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up on QEMU after this long"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			var snap *diagnose.Snapshot
			uri, lv, err := libvirtStatsFor(c, path)
			if err != nil {
				return err
			}
			if lv {
				// netctl-full, if it is to run, runs before --plan is
				// read: a pipe (/dev/stdin, <(netctl plan -j ...)) is
				// read once.
				if err := handOverNow(); err != nil {
					return err
				}
			}
			pool, err := readPool(path, c.String("plan"))
			if err != nil {
				return err
			}
			if c.Bool("qemu-monitor") && !lv {
				return usageErr(path, "--qemu-monitor is for a libvirt domain (--vm DOMAIN): a hand-run QEMU's own monitor is read without it")
			}
			switch {
			case c.String("vm") != "" && (c.String("qmp") != "" || c.String("from") != ""):
				return usageErr(path, "give one of --vm, --qmp and --from")
			case lv:
				if c.String("tap") != "" {
					return usageErr(path, "--tap goes with --from; on a libvirt domain netctl reads the tap libvirt names")
				}
				if pool != nil && !c.Bool("qemu-monitor") {
					return usageErr(path, "--plan needs what the guest negotiated, which only QEMU says: add --qemu-monitor (libvirt then marks the domain tainted)")
				}
				if c.Duration("timeout") <= 0 {
					return usageErr(path, "--timeout %s: use a positive duration (default 30s)", c.Duration("timeout"))
				}
				ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
				defer cancel()
				return diagnoseLibvirt(ctx, c.App.Writer, diagnoseLibvirtOptions{URI: uri, Domain: c.String("vm"), ID: c.String("id"),
					Lower: c.String("lower"), Save: c.String("save"), Monitor: c.Bool("qemu-monitor"), Probe: !c.Bool("no-probe"), JSON: c.Bool("json"), Pool: pool})
			case c.String("vm") != "" && c.Duration("timeout") > 0:
				ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
				defer cancel()
				t, err := resolveTarget(ctx, c.String("vm"), "")
				if err != nil {
					return fmt.Errorf("diagnose: %w", err)
				}
				c.Set("qmp", t.Sock)
			}
			switch {
			case c.String("from") != "" && c.String("qmp") != "":
				return usageErr(path, "use --qmp SOCKET for a running QEMU or --from FILE for a saved snapshot, not both")
			case c.Duration("timeout") <= 0:
				return usageErr(path, "--timeout %s: use a positive duration (default 30s)", c.Duration("timeout"))
			case c.String("from") != "":
				s, err := diagnose.Load(c.String("from"))
				if err != nil {
					return err
				}
				snap = s
				bare := s.Tap == nil && s.VDPA == nil && len(s.Host) == 0 && s.Netdev.ID == ""
				if c.String("tap") != "" && !bare {
					return fmt.Errorf("diagnose: --tap goes with a bare x-query-virtio-status reply; %s already holds the backend's state", c.String("from"))
				}
				if bare {
					if s.NIC == "" {
						s.NIC = c.String("id")
					}
					if c.String("tap") != "" {
						if err := gather.ReadTap(s, c.String("tap")); err != nil {
							return err
						}
					}
					if !c.Bool("no-probe") {
						gather.ReadHost(s, c.String("lower"))
					}
				}
			case c.String("tap") != "" && c.String("from") == "":
				return usageErr(path, "--tap goes with --from (a saved reply); with --qmp netctl finds the tap itself")
			case c.String("qmp") != "":
				ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
				defer cancel()
				q, err := qmp.Dial(ctx, c.String("qmp"))
				if err != nil {
					return fmt.Errorf("diagnose: %w", err)
				}
				defer q.Close()
				s, err := gather.Gather(ctx, q, gather.Options{ID: c.String("id"), Lower: c.String("lower"), Probe: !c.Bool("no-probe")})
				if err != nil {
					return err
				}
				snap = s
			default:
				return usageErr(path, "name a running QEMU with --qmp SOCKET (QEMU: -qmp unix:SOCKET,server=on,wait=off) or a saved snapshot with --from FILE")
			}
			if p := c.String("save"); p != "" {
				if err := snap.Save(p); err != nil {
					return fmt.Errorf("diagnose: --save: %w", err)
				}
			}
			r, err := diagnose.Explain(snap)
			if err != nil {
				return err
			}
			if pool != nil {
				r.CheckPool(pool)
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, r)
			}
			return r.WriteTable(c.App.Writer)
		},
	}
}
