//go:build netctl_split

package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/urfave/cli/v2"
)

// In the split build the exporter and the KubeVirt sidecar run netctl-full
// (full.go) in this process's place, with the same arguments and
// environment: its command tree is this one, so it parses them the same.
var (
	exporterAction        = execFull
	kubevirtSidecarAction = execFull
)

func execFull(c *cli.Context) error {
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
