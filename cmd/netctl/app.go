package main

import (
	"github.com/urfave/cli/v2"
)

func newApp() *cli.App {
	return &cli.App{
		Name:  "netctl",
		Usage: "set up and explain in-kernel virtio-net data paths (vhost-net, vDPA)",
		Description: "netctl opens /dev/vhost-net and vDPA devices, binds them to tap, macvtap or packet-socket\n" +
			"backends with the right virtio-net header and offloads, and explains every feature bit.",
		HideHelpCommand: true,
		Commands: []*cli.Command{
			selftestCommand(),
			vdpaCommand(),
			probeCommand(),
			planCommand(),
			diagnoseCommand(),
			versionCommand(),
		},
	}
}
