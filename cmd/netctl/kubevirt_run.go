//go:build !netctl_split

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/kubevirt"
	"github.com/netctl/netctl/kubevirt/sidecar"
	"github.com/netctl/netctl/policy"
)

// kubevirtSidecarAction serves KubeVirt's hook API (kubevirt.go has the
// command). The netctl_split build has none: it runs netctl-full instead.
func kubevirtSidecarAction(c *cli.Context) error {
	cfg := kubevirt.Config{BindingName: os.Getenv("NETWORK_BINDING_PLUGIN_NAME"), QEMU: c.String("qemu")}
	if p := c.String("plan"); p != "" {
		b, err := readCapped(p, policy.MaxPlanFile)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		if cfg.Plan, err = kubevirt.ParsePlan(b); err != nil {
			return fmt.Errorf("plan %s: %w", p, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	s := &sidecar.Server{Config: cfg, NetworkInfoPath: c.String("network-info"), Log: c.App.ErrWriter}
	return sidecar.Serve(ctx, c.String("socket-dir"), s, func(sock string) {
		fmt.Fprintf(c.App.ErrWriter, "netctl kubevirt sidecar: serving %s (binding %s)\n", sock, bindingName(cfg))
	})
}

func bindingName(cfg kubevirt.Config) string {
	if cfg.BindingName == "" {
		return kubevirt.DefaultBindingName
	}
	return cfg.BindingName
}
