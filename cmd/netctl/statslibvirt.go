package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/stats"
)

// libvirtStatsFor says whether --vm of stats, diagnose or attach is a libvirt
// domain, and on which URI: --libvirt URI says so; else a QEMU named --vm
// whose monitor is libvirt's is one (on the default URI).
func libvirtStatsFor(c *cli.Context, path string) (uri string, ok bool, err error) {
	if uri, ok, decided, err := libvirtFlags(c, path); decided {
		return uri, ok, err
	}
	return c.String("libvirt"), runByLibvirt(c.String("vm")), nil
}

// libvirtFlags is what the flags alone decide about --vm being a libvirt
// domain (decided true): --libvirt URI makes it one (and needs --vm, not
// --qmp); no --vm, or --qmp, makes it none. Otherwise the caller looks.
func libvirtFlags(c *cli.Context, path string) (uri string, ok, decided bool, err error) {
	vm := c.String("vm")
	if c.IsSet("libvirt") {
		if vm == "" || c.String("qmp") != "" {
			return "", false, true, usageErr(path, "--libvirt needs --vm DOMAIN (a name or UUID), not --qmp")
		}
		return c.String("libvirt"), true, true, nil
	}
	if vm == "" || c.String("qmp") != "" {
		return "", false, true, nil
	}
	return "", false, false, nil
}

// listLibvirt lists a libvirt domain's virtio NICs (libvirt's live XML)
// with netctl's records of that domain, then --id.
func (w *statsWatch) listLibvirt(ctx context.Context) ([]stats.Target, error) {
	found, err := stats.LibvirtTargets(ctx, *w.libvirt, w.vm)
	if err != nil {
		return nil, err
	}
	recs, err := stats.StateTargets(runDir())
	if err != nil {
		return nil, err
	}
	var mine []stats.Target
	for _, t := range recs {
		if t.Libvirt != nil && len(found) > 0 && found[0].Libvirt != nil && t.Libvirt.UUID == found[0].Libvirt.UUID {
			t.PID, t.PIDStart = found[0].PID, found[0].PIDStart
			mine = append(mine, t)
		}
	}
	var out []stats.Target
	for _, t := range stats.MergeTargets(mine, found) {
		if w.id == "" || t.NIC == w.id {
			out = append(out, t)
		}
	}
	return out, nil
}
