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
// arguments and environment; it returns only on failure.
func execFullNow() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding %s: %w", fullName, err)
	}
	full, err := findFull(exe)
	if err != nil {
		return err
	}
	argv := append([]string{full}, os.Args[1:]...)
	if err := syscall.Exec(full, argv, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", full, err)
	}
	return nil
}
