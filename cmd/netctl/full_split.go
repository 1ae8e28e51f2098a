//go:build netctl_split

package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/libvirtdom"
)

// In the split build the exporter and the KubeVirt sidecar run netctl-full
// (full.go) in this process's place, with the same arguments and
// environment: its command tree is this one, so it parses them the same.
var (
	exporterAction        = execFull
	kubevirtSidecarAction = execFull
)

// The split netctl links no libvirt RPC client (libvirt_full.go): a
// command that dials libvirt runs netctl-full in its place, when that is
// still transparent (handOver).
func init() {
	libvirtdom.Unlinked = func() error { return handOver(execFullNow) }
}

func execFull(*cli.Context) error { return execFullNow() }

// execFullNow replaces this process with netctl-full, with the same
// arguments and environment (and fullEnv); it returns only on failure,
// and at once when this process is itself what a split netctl ran as
// netctl-full (a split netctl installed there).
func execFullNow() error {
	if os.Getenv(fullEnv) != "" {
		// This process was started as netctl-full, by a split netctl:
		// running netctl-full again would run this program again, forever.
		return fmt.Errorf("%s is not %s but a netctl that leaves this command out (built with the netctl_split tag, as make build's bin/netctl is), so this command cannot run: "+
			"put the %s that make build builds beside bin/netctl there (make install and the package do)", os.Args[0], fullName, fullName)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding %s: %w", fullName, err)
	}
	full, err := findFull(exe)
	if err != nil {
		return err
	}
	argv := append([]string{full}, os.Args[1:]...)
	env := append(os.Environ(), fullEnv+"="+exe, fullVersionEnv+"="+buildID())
	if err := syscall.Exec(full, argv, env); err != nil {
		return fmt.Errorf("running %s: %w", full, err)
	}
	return nil
}
