package main

import (
	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/kubevirt"
)

func kubevirtCommand() *cli.Command {
	return &cli.Command{
		Name:        "kubevirt",
		Usage:       "KubeVirt's network binding plugin (deploy/README.md)",
		Subcommands: []*cli.Command{kubevirtSidecarCommand()},
	}
}

func kubevirtSidecarCommand() *cli.Command {
	return &cli.Command{
		Name:  "sidecar",
		Usage: "serve KubeVirt's hook sidecar API in a virt-launcher pod: rewrite netctl-bound interfaces of the domain",
		Description: "Run as the binding's sidecarImage (KubeVirt CR spec.configuration.network.binding.netctl). It listens on\n" +
			"SOCKET-DIR/" + kubevirt.SocketName + " (netctl-BINDING.sock for another binding name), answers virt-launcher's Info (v1alpha3: OnDefineDomain, Shutdown)\n" +
			"and rewrites, in OnDefineDomain, each VMI interface whose binding is $NETWORK_BINDING_PLUGIN_NAME (default\n" +
			"netctl), found by its alias ua-NAME: <driver name='vhost' queues=N> on the tap netctl's CNI plugin made (N: one\n" +
			"per vCPU with networkInterfaceMultiqueue), or type='vdpa' on the device " + kubevirt.NetworkInfoPath + " names\n" +
			"(downwardAPI: device-info), and with --plan the pool's pinned offloads and <qemu:override>; nothing else of the\n" +
			"domain changes. It needs no privilege and opens no device. It stops at Shutdown or SIGTERM and removes its\n" +
			"socket. One JSON line per call goes to stderr.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket-dir", Value: kubevirt.SocketDir, Usage: "the directory virt-launcher scans (the sidecar's own view of it)"},
			&cli.StringFlag{Name: "plan", Usage: "a pool's plan (netctl plan -j HOST.json... > POOL.json, e.g. from a ConfigMap) whose offloads to pin"},
			&cli.StringFlag{Name: "qemu", Usage: "virt-launcher's QEMU version (qemu-system-x86_64 --version in its image): plan properties that QEMU lacks (the USO ones before 8.2) are left out, as it would refuse them"},
			&cli.StringFlag{Name: "network-info", Value: kubevirt.NetworkInfoPath, Usage: "the pod's network-info file (downwardAPI: device-info)"},
		},
		Action: kubevirtSidecarAction,
	}
}
