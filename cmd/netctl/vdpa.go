package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON (the keys iproute2's vdpa -j uses)"}

// vdpaTimeout bounds each vdpa command's netlink calls; dev del waits for
// the kernel's delete (held back while a vhost-vdpa fd is open) no longer.
var vdpaTimeout = &cli.DurationFlag{Name: "timeout", Value: 10 * time.Second,
	Usage: "give up on the kernel after this long (dev del: while a process holds the device open)"}

func vdpaCommand() *cli.Command {
	return &cli.Command{
		Name:  "vdpa",
		Usage: "manage vDPA devices (like iproute2's vdpa, with a name for every feature bit)",
		Flags: []cli.Flag{jsonFlag, vdpaTimeout}, // netctl vdpa -j dev show X, as vdpa -j dev show X
		Subcommands: []*cli.Command{
			{
				Name:  "mgmtdev",
				Usage: "management devices",
				Subcommands: []*cli.Command{{
					Name: "show", Usage: "list management devices", Flags: []cli.Flag{jsonFlag},
					Action: func(c *cli.Context) error {
						return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error {
							mds, err := v.MgmtDevs(ctx)
							if err != nil {
								return err
							}
							if wantJSON(c) {
								return printJSON(c.App.Writer, mgmtdevJSON(mds))
							}
							printMgmtDevs(c.App.Writer, mds)
							return nil
						})
					},
				}},
			},
			{
				Name:  "dev",
				Usage: "vDPA devices",
				Subcommands: []*cli.Command{
					{
						Name: "show", Usage: "list devices, or show DEV", ArgsUsage: "[DEV]", Flags: []cli.Flag{jsonFlag},
						Action: func(c *cli.Context) error {
							return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error {
								var devs []vdpa.Device
								if name := c.Args().First(); name != "" {
									d, err := v.Device(ctx, name)
									if err != nil {
										return err
									}
									devs = []vdpa.Device{d}
								} else {
									var err error
									if devs, err = v.Devices(ctx); err != nil {
										return err
									}
								}
								if wantJSON(c) {
									return printJSON(c.App.Writer, devJSON(devs))
								}
								printDevs(c.App.Writer, devs)
								return nil
							})
						},
					},
					{
						Name: "add", Usage: "add a device", ArgsUsage: " ",
						Flags: []cli.Flag{
							&cli.StringFlag{Name: "name", Required: true, Usage: "device name"},
							&cli.StringFlag{Name: "mgmtdev", Required: true, Usage: "management device (name or bus/name)"},
							&cli.StringFlag{Name: "mac", Usage: "MAC address"},
							&cli.UintFlag{Name: "mtu", Usage: "MTU, 68..65535"},
							&cli.UintFlag{Name: "max-vqp", Usage: "maximum queue pairs, 1..32768"},
						},
						Action: func(c *cli.Context) error {
							o := vdpa.AddOptions{Name: c.String("name"), MgmtDev: c.String("mgmtdev")}
							var err error
							if o.MTU, err = uint16Flag(c, "mtu", vdpa.MinMTU, vdpa.MaxMTU); err != nil {
								return err
							}
							if o.MaxVQP, err = uint16Flag(c, "max-vqp", 1, vdpa.MaxVQPairs); err != nil {
								return err
							}
							if m := c.String("mac"); m != "" {
								mac, err := net.ParseMAC(m)
								if err != nil || len(mac) != 6 {
									return fmt.Errorf("--mac %q: want a 6-byte Ethernet address such as 02:00:00:00:00:01: %w", m, vdpa.ErrInvalid)
								}
								o.MAC = mac
							}
							if err := o.Validate(); err != nil {
								return err
							}
							return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error { return v.AddDevice(ctx, o) })
						},
					},
					{
						Name: "del", Usage: "delete DEV", ArgsUsage: "DEV",
						Action: func(c *cli.Context) error {
							if c.Args().Len() != 1 {
								return fmt.Errorf("vdpa dev del: name one device: %w", vdpa.ErrInvalid)
							}
							return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error { return v.DeleteDevice(ctx, c.Args().First()) })
						},
					},
					{
						Name:  "config",
						Usage: "device configuration",
						Subcommands: []*cli.Command{{
							Name: "show", Usage: "show the config of every device, or of DEV", ArgsUsage: "[DEV]", Flags: []cli.Flag{jsonFlag},
							Action: func(c *cli.Context) error {
								return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error {
									var cfgs []vdpa.Config
									if name := c.Args().First(); name != "" {
										cfg, err := v.Config(ctx, name)
										if err != nil {
											return err
										}
										cfgs = []vdpa.Config{cfg}
									} else {
										var err error
										if cfgs, err = v.Configs(ctx); err != nil {
											return err
										}
									}
									if wantJSON(c) {
										return printJSON(c.App.Writer, configJSON(cfgs))
									}
									printConfigs(c.App.Writer, cfgs)
									return nil
								})
							},
						}},
					},
					{
						Name: "vstats", Usage: "per-queue vendor statistics of DEV", ArgsUsage: "DEV QUEUE",
						Flags: []cli.Flag{jsonFlag},
						Action: func(c *cli.Context) error {
							if c.Args().Len() != 2 {
								return fmt.Errorf("vdpa dev vstats: give a device and a queue index: %w", vdpa.ErrInvalid)
							}
							q64, err := strconv.ParseUint(c.Args().Get(1), 10, 32)
							if err != nil {
								return fmt.Errorf("queue index %q: want 0..%d: %w", c.Args().Get(1), uint32(math.MaxUint32), vdpa.ErrInvalid)
							}
							q := uint32(q64)
							return withVDPA(c, func(ctx context.Context, v *vdpa.Client) error {
								_, stats, err := v.VStats(ctx, c.Args().First(), q)
								if err != nil {
									return err
								}
								if wantJSON(c) {
									m := map[string]any{"queue_index": q}
									for _, s := range stats {
										m[s.Name] = s.Value
									}
									return printJSON(c.App.Writer, map[string]any{"vstats": map[string]any{c.Args().First(): m}})
								}
								for _, s := range stats {
									fmt.Fprintf(c.App.Writer, "%s %d\n", s.Name, s.Value)
								}
								return nil
							})
						},
					},
				},
			},
		},
	}
}

// withVDPA runs f with a vdpa client, under the command's context and
// --timeout.
func withVDPA(c *cli.Context, f func(context.Context, *vdpa.Client) error) error {
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	timeout := vdpaTimeout.Value
	for _, x := range c.Lineage() {
		if x.IsSet("timeout") {
			timeout = x.Duration("timeout")
			break
		}
	}
	if timeout <= 0 {
		return fmt.Errorf("--timeout %s: want a positive duration: %w", timeout, vdpa.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	v, err := vdpa.Dial(ctx)
	if err != nil {
		return err
	}
	defer v.Close()
	return f(ctx, v)
}

// uint16Flag reads a numeric flag that must lie in lo..hi (or be 0, left
// out): a larger value is refused, not truncated.
func uint16Flag(c *cli.Context, name string, lo, hi uint) (uint16, error) {
	v := c.Uint(name)
	if !c.IsSet(name) {
		return 0, nil
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("--%s %d: out of range %d..%d: %w", name, v, lo, hi, vdpa.ErrInvalid)
	}
	return uint16(v), nil
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, string(b))
	return nil
}

func featureList(f virtio.Features) []string {
	n := vdpa.FeatureNames(f)
	if n == nil {
		return []string{}
	}
	return n
}

func mgmtdevJSON(mds []vdpa.MgmtDev) map[string]any {
	out := map[string]any{}
	for _, m := range mds {
		e := map[string]any{"supported_classes": m.Classes}
		if m.HasMaxVQs {
			e["max_supported_vqs"] = m.MaxVQs
		}
		if m.HasDevFeatures {
			e["dev_features"] = featureList(m.DevFeatures)
		}
		out[m.Handle()] = e
	}
	return map[string]any{"mgmtdev": out}
}

func devJSON(devs []vdpa.Device) map[string]any {
	out := map[string]any{}
	for _, d := range devs {
		out[d.Name] = map[string]any{"type": d.Type(), "mgmtdev": d.MgmtDev, "vendor_id": d.VendorID,
			"max_vqs": d.MaxVQs, "max_vq_size": d.MaxVQSize}
	}
	return map[string]any{"dev": out}
}

func configJSON(cfgs []vdpa.Config) map[string]any {
	out := map[string]any{}
	for _, c := range cfgs {
		e := map[string]any{}
		if c.MAC != nil {
			e["mac"] = c.MAC.String()
		}
		if c.HasStatus {
			e["link"] = map[bool]string{true: "up", false: "down"}[c.LinkUp]
			e["link_announce"] = c.Announce
		}
		if c.MaxVQP != 0 {
			e["max_vq_pairs"] = c.MaxVQP
		}
		if c.MTU != 0 {
			e["mtu"] = c.MTU
		}
		if c.HasNegotiated {
			e["negotiated_features"] = featureList(c.Negotiated)
		}
		if c.Features != 0 {
			e["dev_features"] = featureList(c.Features)
		}
		out[c.Name] = e
	}
	return map[string]any{"config": out}
}

func printMgmtDevs(w io.Writer, mds []vdpa.MgmtDev) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MGMTDEV\tCLASSES\tMAX VQS\tDEVICE FEATURES")
	for _, m := range mds {
		vqs := "-"
		if m.HasMaxVQs {
			vqs = fmt.Sprint(m.MaxVQs)
		}
		feats := "-"
		if m.DevFeatures != 0 {
			feats = strings.Join(vdpa.FeatureNames(m.DevFeatures), " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Handle(), strings.Join(m.Classes, ","), vqs, feats)
	}
	tw.Flush()
}

func printDevs(w io.Writer, devs []vdpa.Device) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEV\tTYPE\tMGMTDEV\tVENDOR\tMAX VQS\tMAX VQ SIZE\tDRIVER")
	for _, d := range devs {
		drv, _ := vdpa.BoundDriver(d.Name)
		if drv == "" {
			drv = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", d.Name, d.Type(), d.MgmtDev, d.VendorID, d.MaxVQs, d.MaxVQSize, drv)
	}
	tw.Flush()
}

func printConfigs(w io.Writer, cfgs []vdpa.Config) {
	for _, c := range cfgs {
		fmt.Fprintf(w, "%s:", c.Name)
		if c.MAC != nil {
			fmt.Fprintf(w, " mac %s", c.MAC)
		}
		if c.HasStatus {
			fmt.Fprintf(w, " link %s link_announce %v", map[bool]string{true: "up", false: "down"}[c.LinkUp], c.Announce)
		}
		if c.MaxVQP != 0 {
			fmt.Fprintf(w, " max_vq_pairs %d", c.MaxVQP)
		}
		if c.MTU != 0 {
			fmt.Fprintf(w, " mtu %d", c.MTU)
		}
		fmt.Fprintln(w)
		if c.HasNegotiated {
			fmt.Fprintf(w, "  negotiated_features %s\n", strings.Join(vdpa.FeatureNames(c.Negotiated), " "))
		}
		if c.Features != 0 {
			fmt.Fprintf(w, "  dev_features %s\n", strings.Join(vdpa.FeatureNames(c.Features), " "))
		}
	}
}

// wantJSON is true when -j/--json was given at any level of the command
// (netctl vdpa -j dev show, or netctl vdpa dev show -j).
func wantJSON(c *cli.Context) bool {
	for _, x := range c.Lineage() {
		if x.Bool("json") {
			return true
		}
	}
	return false
}
