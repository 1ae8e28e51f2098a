package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/libvirtattach"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/state"
)

// libvirtFor says whether attach's --vm is a libvirt domain, and on which
// URI: --libvirt URI says so; else a QEMU named --vm whose monitor is
// libvirt's is one (on the default URI). Flags that only mean something
// for a hand-run QEMU are refused with --libvirt.
func libvirtFor(c *cli.Context, path string) (uri string, ok bool, err error) {
	uri, ok, err = libvirtStatsFor(c, path)
	if err != nil || !ok {
		return "", false, err
	}
	for _, f := range []string{"tap", "shared-tap", "macvtap", "bus"} {
		if c.IsSet(f) {
			return "", false, usageErr(path, "--%s is for a hand-run QEMU: on a libvirt domain netctl makes its own tap (or uses --vdpa, --mgmtdev) and libvirt plugs it in", f)
		}
	}
	return uri, true, nil
}

// runByLibvirt says a QEMU named vm runs with libvirt's monitor: a
// libvirt domain.
func runByLibvirt(vm string) bool {
	v, err := qemuproc.Find(vm)
	if err != nil {
		return false
	}
	for _, m := range v.Monitors {
		if m.Libvirt {
			return true
		}
	}
	return false
}

// attachLibvirt is netctl attach on a libvirt domain (libvirtattach).
func attachLibvirt(c *cli.Context, path, uri string) error {
	// netctl-full, if it is to run, runs before --plan is read: a pipe
	// (/dev/stdin, <(netctl plan -j ...)) is read once.
	if err := handOverNow(); err != nil {
		return err
	}
	pool, err := readPool(path, c.String("plan"))
	if err != nil {
		return err
	}
	ctx, interrupted, stop := interruptible(c.Duration("timeout"))
	defer stop()
	nic, err := libvirtattach.Attach(ctx, libvirtattach.Request{URI: uri, Domain: c.String("vm"), ID: c.String("id"),
		Backend: c.String("backend"), VDPA: c.String("vdpa"), Mgmtdev: c.String("mgmtdev"), Queues: c.Int("queues"), MAC: c.String("mac"), MTU: c.Int("mtu"), Profile: c.String("profile"), Pool: pool,
		Persistent: c.Bool("persistent"), StateDir: runDir()})
	if err != nil {
		return interruptedErr("attach", interrupted, err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, nic)
	}
	printAttached(c.App.Writer, nic)
	return nil
}

// libvirtDetachFor says whether detach's --vm is a libvirt domain, and on
// which URI: --libvirt URI, or a record of NIC --id that netctl attached
// through libvirt to a domain of that name or UUID (then its URI).
func libvirtDetachFor(c *cli.Context, path string) (uri string, ok bool, err error) {
	if uri, ok, decided, err := libvirtFlags(c, path); decided {
		return uri, ok, err
	}
	vm := c.String("vm")
	store, err := state.Open(runDir())
	if err != nil {
		return "", false, nil // the QEMU path says what is wrong
	}
	recs, _, err := store.List("")
	if err != nil {
		return "", false, nil
	}
	var found []*state.NIC
	for _, n := range recs {
		if n.Libvirt != nil && n.ID == c.String("id") && (n.VM == vm || n.Libvirt.UUID == vm) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		// No record: a NIC attached with --persistent to a domain
		// restarted since (the hook made its tap at the start) is found
		// through libvirt, when libvirt runs the VM.
		return "", runByLibvirt(vm), nil
	case 1:
		return found[0].Libvirt.URI, true, nil
	}
	return "", false, fmt.Errorf("netctl attached NIC %s to %d libvirt domains named %s: name the domain by its UUID (netctl list): %w",
		c.String("id"), len(found), vm, state.ErrInvalid)
}
