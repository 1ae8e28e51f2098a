package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/virtio"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON (the keys iproute2's vdpa -j uses)"}

func vdpaCommand() *cli.Command {
	return &cli.Command{
		Name:  "vdpa",
		Usage: "manage vDPA devices (like iproute2's vdpa, with a name for every feature bit)",
		Flags: []cli.Flag{jsonFlag}, // netctl vdpa -j dev show X, as vdpa -j dev show X
		Subcommands: []*cli.Command{
			{
				Name:  "mgmtdev",
				Usage: "management devices",
				Subcommands: []*cli.Command{{
					Name: "show", Usage: "list management devices", Flags: []cli.Flag{jsonFlag},
					Action: func(c *cli.Context) error {
						return withVDPA(func(v *vdpa.Client) error {
							mds, err := v.MgmtDevs()
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
							return withVDPA(func(v *vdpa.Client) error {
								var devs []vdpa.Device
								if name := c.Args().First(); name != "" {
									d, err := v.Device(name)
									if err != nil {
										return err
									}
									devs = []vdpa.Device{d}
								} else {
									var err error
									if devs, err = v.Devices(); err != nil {
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
							&cli.UintFlag{Name: "mtu", Usage: "MTU"},
							&cli.UintFlag{Name: "max-vqp", Usage: "maximum queue pairs"},
						},
						Action: func(c *cli.Context) error {
							o := vdpa.AddOptions{Name: c.String("name"), MgmtDev: c.String("mgmtdev"),
								MTU: uint16(c.Uint("mtu")), MaxVQP: uint16(c.Uint("max-vqp"))}
							if m := c.String("mac"); m != "" {
								mac, err := net.ParseMAC(m)
								if err != nil {
									return fmt.Errorf("--mac %q: %w", m, err)
								}
								o.MAC = mac
							}
							return withVDPA(func(v *vdpa.Client) error { return v.AddDevice(o) })
						},
					},
					{
						Name: "del", Usage: "delete DEV", ArgsUsage: "DEV",
						Action: func(c *cli.Context) error {
							if c.Args().Len() != 1 {
								return fmt.Errorf("vdpa dev del: name one device")
							}
							return withVDPA(func(v *vdpa.Client) error { return v.DeleteDevice(c.Args().First()) })
						},
					},
					{
						Name:  "config",
						Usage: "device configuration",
						Subcommands: []*cli.Command{{
							Name: "show", Usage: "show the config of every device, or of DEV", ArgsUsage: "[DEV]", Flags: []cli.Flag{jsonFlag},
							Action: func(c *cli.Context) error {
								return withVDPA(func(v *vdpa.Client) error {
									var cfgs []vdpa.Config
									if name := c.Args().First(); name != "" {
										cfg, err := v.Config(name)
										if err != nil {
											return err
										}
										cfgs = []vdpa.Config{cfg}
									} else {
										var err error
										if cfgs, err = v.Configs(); err != nil {
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
								return fmt.Errorf("vdpa dev vstats: give a device and a queue index")
							}
							var q uint32
							if _, err := fmt.Sscan(c.Args().Get(1), &q); err != nil {
								return fmt.Errorf("queue index %q: %w", c.Args().Get(1), err)
							}
							return withVDPA(func(v *vdpa.Client) error {
								_, stats, err := v.VStats(c.Args().First(), q)
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

func withVDPA(f func(*vdpa.Client) error) error {
	v, err := vdpa.Dial()
	if err != nil {
		return err
	}
	defer v.Close()
	return f(v)
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
