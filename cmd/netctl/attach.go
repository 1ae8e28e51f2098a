package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/libvirtattach"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// targetFlags are --vm and --qmp, one of which names the VM.
func targetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "vm", Usage: "the VM, by QEMU's -name"},
		&cli.StringFlag{Name: "qmp", Usage: "the VM's QMP socket (-qmp unix:SOCKET,server=on,wait=off)"},
	}
}

// target resolves --vm/--qmp (exactly one).
func target(ctx context.Context, c *cli.Context, path string) (vmTarget, error) {
	vm, q := c.String("vm"), c.String("qmp")
	switch {
	case vm == "" && q == "":
		return vmTarget{}, usageErr(path, "name the VM: --vm NAME or --qmp SOCKET")
	case vm != "" && q != "":
		return vmTarget{}, usageErr(path, "give --vm NAME or --qmp SOCKET, not both")
	}
	return resolveTarget(ctx, vm, q)
}

func attachCommand() *cli.Command {
	const path = "netctl attach"
	return &cli.Command{
		Name:  "attach",
		Usage: "give a running QEMU VM a virtio-net NIC (hotplug over QMP): the best backend here (vDPA, then vhost-net, then QEMU's userspace virtio-net), with the reasons",
		Description: "netctl creates or opens the backend (a multiqueue tap, a macvtap on LOWER, a vdpa device), opens one /dev/vhost-net\n" +
			"per queue pair on the vhost-net path, passes the fds to QEMU over QMP (getfd), then netdev_add and device_add.\n" +
			"Any failure undoes every step. The NIC is recorded under /run/netctl (NETCTL_RUN_DIR) for detach and list.",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "id", Usage: "the NIC's device id in QEMU (a letter, then letters, digits, '-', '.', '_')", Required: true},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "auto, vdpa, vhost-net or userspace (no fallback unless auto)"},
			&cli.StringFlag{Name: "tap", Usage: "use this existing tap (netctl creates one otherwise); one whose queues another process holds is refused"},
			&cli.BoolFlag{Name: "shared-tap", Usage: "let --tap join a multiqueue tap whose queues another process (another VM) holds: both share it, and --mtu changes both"},
			&cli.StringFlag{Name: "macvtap", Usage: "create a macvtap on LOWER[:MODE] (mode bridge, vepa, private, passthru)"},
			&cli.StringFlag{Name: "vdpa", Usage: "use this vdpa device (bound to vhost_vdpa)"},
			&cli.StringFlag{Name: "mgmtdev", Usage: "create a vdpa device on this management device"},
			&cli.IntFlag{Name: "queues", Value: 1, Usage: "queue pairs (1 to 256)"},
			&cli.StringFlag{Name: "mac", Usage: "the guest's MAC (default: 52:54:00 and three random bytes)"},
			&cli.IntFlag{Name: "mtu", Usage: "the backend's MTU (68 to 65521)"},
			&cli.StringFlag{Name: "bus", Usage: "the PCI bus to plug into (a pcie-root-port's id); default: a free pcie-root-port on q35, QEMU's choice elsewhere"},
			&cli.StringFlag{Name: "profile", Value: "throughput", Usage: "throughput, latency (adds vhost busy-polling) or compat"},
			planFlag,
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print the NIC's record as JSON"},
			&cli.StringFlag{Name: "libvirt", Usage: "--vm names a libvirt domain (name or UUID) on this libvirt URI: libvirt hotplugs netctl's tap (default for a VM libvirt runs: " + libvirtdom.DefaultURI + ")"},
			&cli.BoolFlag{Name: "persistent", Usage: "libvirt domain: also add the NIC to its persistent definition"},
		),
		Action: func(c *cli.Context) error {
			if c.Duration("timeout") <= 0 {
				return usageErr(path, "--timeout %s: use a positive duration", c.Duration("timeout"))
			}
			if uri, ok, err := libvirtFor(c, path); err != nil {
				return err
			} else if ok {
				return attachLibvirt(c, path, uri)
			}
			if c.Bool("persistent") {
				return usageErr(path, "--persistent is for a libvirt domain (--libvirt URI, or --vm naming a domain libvirt runs)")
			}
			if q := c.Int("queues"); q < 1 || q > 256 {
				return usageErr(path, "--queues %d: out of range 1..256", q)
			}
			// 0 in attach.Request is "leave the backend's MTU"; given on
			// the command line it is a mistake, like any value out of range.
			if m := c.Int("mtu"); c.IsSet("mtu") && (m < 68 || m > 65521) {
				return usageErr(path, "--mtu %d: out of range 68..65521 (a tap takes up to 65521)", m)
			}
			pool, err := readPool(path, c.String("plan"))
			if err != nil {
				return err
			}
			ctx, interrupted, stop := interruptible(c.Duration("timeout"))
			defer stop()
			tg, err := target(ctx, c, path)
			if err != nil {
				return interruptedErr("attach", interrupted, err)
			}
			times := stepTimes()
			nic, err := attach.Attach(ctx, attach.Request{QMP: tg.Sock, VMName: tg.Name, QEMUPID: tg.PID, QEMUStart: tg.Start, ID: c.String("id"), Backend: c.String("backend"),
				Tap: c.String("tap"), SharedTap: c.Bool("shared-tap"), Macvtap: c.String("macvtap"), VDPA: c.String("vdpa"), Mgmtdev: c.String("mgmtdev"),
				Queues: c.Int("queues"), MAC: c.String("mac"), MTU: c.Int("mtu"), Profile: c.String("profile"), Bus: c.String("bus"), Pool: pool, StateDir: runDir(),
				Times: times})
			if err != nil {
				return interruptedErr("attach", interrupted, err)
			}
			if times != nil {
				// make bench's per-step breakdown (NETCTL_STEP_TIMES=1).
				b, _ := json.Marshal(times)
				fmt.Fprintf(c.App.ErrWriter, "netctl attach: step times: %s\n", b)
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, nic)
			}
			printAttached(c.App.Writer, nic)
			return nil
		},
	}
}

// stepTimes is where attach puts its per-step times when make bench asks
// (NETCTL_STEP_TIMES set: to the time netctl was started, in Unix
// nanoseconds, the steps begin with what came before Attach), else nil.
// A value that is not a time at most a minute before main (1, garbage)
// still asks, without the step from exec to main.
func stepTimes() *attach.StepTimes {
	v := os.Getenv("NETCTL_STEP_TIMES")
	if v == "" {
		return nil
	}
	t := &attach.StepTimes{}
	ns, err := strconv.ParseInt(v, 10, 64)
	if before := mainStart.Sub(time.Unix(0, ns)); err == nil && !mainStart.IsZero() && before >= 0 && before <= time.Minute {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		t.Steps = []attach.StepTime{
			{Step: "exec to main (the process, Go's runtime and package init)", MS: ms(mainStart.Sub(time.Unix(0, ns)))},
			{Step: "main to Attach (the command line)", MS: ms(time.Since(mainStart))},
		}
	}
	return t
}

// chainLine is the fallback chain in one line: "vdpa: WHY; vhost-net:
// WHY -> userspace".
func chainLine(steps []state.Step) string {
	var skipped []string
	chosen := ""
	for _, s := range steps {
		if s.Chosen {
			chosen = s.Backend + " (" + s.Reason + ")"
			break
		}
		skipped = append(skipped, s.Backend+": "+s.Reason)
	}
	if len(skipped) == 0 {
		return chosen
	}
	return strings.Join(skipped, "; ") + " -> " + chosen
}

func backendLabel(b string) string {
	switch b {
	case "userspace":
		return "QEMU userspace virtio-net"
	case "vhost-net":
		return "kernel vhost-net"
	case "vdpa":
		return "vDPA (vhost-vdpa)"
	}
	return b
}

func printAttached(w io.Writer, n *state.NIC) {
	vm := n.VM
	if vm == "" {
		vm = n.QMP
	}
	if n.Libvirt != nil {
		fmt.Fprintf(w, "attached %s to libvirt domain %s (uuid %s, QEMU %s, alias %s): %s, %d queue pair(s), mac %s\n",
			n.ID, vm, n.Libvirt.UUID, n.QEMUVersion, n.Libvirt.Alias, backendLabel(n.Backend), n.Queues, n.MAC)
	} else {
		fmt.Fprintf(w, "attached %s to %s (QEMU %s, pid %d, %s): %s, %d queue pair(s), mac %s\n",
			n.ID, vm, n.QEMUVersion, n.QEMUPID, n.Machine, backendLabel(n.Backend), n.Queues, n.MAC)
	}
	fmt.Fprintf(w, "  backend:    %s\n", chainLine(n.Steps))
	switch {
	case n.Tap != nil:
		how := "opened"
		if n.Tap.Created {
			how = "created"
		}
		fmt.Fprintf(w, "  tap:        %s (%s by netctl)\n", n.Tap.Name, how)
	case n.Macvtap != nil:
		fmt.Fprintf(w, "  macvtap:    %s on %s, mode %s (created by netctl)\n", n.Macvtap.Name, n.Macvtap.Lower, n.Macvtap.Mode)
	case n.VDPA != nil:
		fmt.Fprintf(w, "  vdpa:       %s (%s)\n", n.VDPA.Name, n.VDPA.Vhost)
	}
	fmt.Fprintf(w, "  netdev:     %s, fds %s\n", n.Netdev, strings.Join(n.FDNames, " "))
	fmt.Fprintf(w, "  features:   %s\n", strings.Join(n.Features, "|"))
	if n.Pool != "" {
		fmt.Fprintf(w, "  pool:       %s (pinned: nothing outside the plan is offered)\n", n.Pool)
	}
	var props []string
	for _, k := range sortedProps(n.Properties) {
		props = append(props, k+"="+n.Properties[k])
	}
	if len(props) == 0 {
		props = []string{"(QEMU's defaults)"}
	}
	fmt.Fprintf(w, "  properties: %s\n", strings.Join(props, ","))
	if n.BusyPollUS > 0 {
		fmt.Fprintf(w, "  busy-poll:  %d us (poll-us)\n", n.BusyPollUS)
	}
}

func detachCommand() *cli.Command {
	const path = "netctl detach"
	return &cli.Command{
		Name:  "detach",
		Usage: "take a NIC netctl attached away from a running VM: device_del, wait for the guest (DEVICE_DELETED), netdev_del, delete what netctl created",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "id", Usage: "the NIC's device id", Required: true},
			&cli.DurationFlag{Name: "timeout", Value: attach.DefaultDetachTimeout, Usage: "how long to wait for the guest to release the NIC"},
			&cli.StringFlag{Name: "libvirt", Usage: "--vm names a libvirt domain (name or UUID) on this libvirt URI (default for a NIC netctl attached through libvirt: the URI it used)"},
		),
		Action: func(c *cli.Context) error {
			if c.Duration("timeout") <= 0 {
				return usageErr(path, "--timeout %s: use a positive duration", c.Duration("timeout"))
			}
			if uri, ok, err := libvirtDetachFor(c, path); err != nil {
				return err
			} else if ok {
				ctx, interrupted, stop := interruptible(c.Duration("timeout") + 30*time.Second)
				defer stop()
				if err := libvirtattach.Detach(ctx, libvirtattach.DetachRequest{URI: uri, Domain: c.String("vm"), ID: c.String("id"), StateDir: runDir(), Wait: c.Duration("timeout")}); err != nil {
					return interruptedErr("detach", interrupted, err)
				}
				fmt.Fprintf(c.App.Writer, "detached %s\n", c.String("id"))
				return nil
			}
			ctx, interrupted, stop := interruptible(c.Duration("timeout") + 30*time.Second)
			defer stop()
			sock, name, err := detachTarget(ctx, c, path, c.String("id"))
			if err != nil {
				return interruptedErr("detach", interrupted, err)
			}
			if err := attach.Detach(ctx, attach.DetachRequest{QMP: sock, VMName: name, ID: c.String("id"), StateDir: runDir(), Timeout: c.Duration("timeout")}); err != nil {
				return interruptedErr("detach", interrupted, err)
			}
			fmt.Fprintf(c.App.Writer, "detached %s\n", c.String("id"))
			return nil
		},
	}
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "the NICs netctl attached, each checked against its QEMU: backend, link, queues, why this backend",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "vm", Usage: "only this VM's NICs"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			nics, err := attach.List(ctx, attach.ListRequest{VMName: c.String("vm"), StateDir: runDir(),
				Unreadable: func(err error) { fmt.Fprintf(c.App.ErrWriter, "netctl: list: %v\n", err) }})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if nics == nil {
					nics = []attach.Listed{}
				}
				return printJSON(c.App.Writer, nics)
			}
			printList(c.App.Writer, nics)
			return nil
		},
	}
}

func printList(w io.Writer, nics []attach.Listed) {
	if len(nics) == 0 {
		fmt.Fprintln(w, "no NICs attached by netctl")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tID\tBACKEND\tLINK\tQUEUES\tMAC\tSTATUS\tIN QEMU")
	for _, n := range nics {
		link := "-"
		switch {
		case n.Tap != nil:
			link = "tap " + n.Tap.Name
		case n.Macvtap != nil:
			link = "macvtap " + n.Macvtap.Name
		case n.VDPA != nil:
			link = "vdpa " + n.VDPA.Name
		}
		if n.Link == "missing" {
			link += " (missing)"
		}
		vm := n.VM
		switch {
		case n.Libvirt != nil && vm == "":
			vm = "libvirt:" + n.Libvirt.UUID
		case n.Libvirt != nil:
			vm += " (libvirt)"
		case vm == "":
			vm = n.QMP
		}
		present := n.Present
		if n.Check != "" {
			present += " (" + n.Check + ")"
		}
		// The VM's name is QEMU's -name, the link a name from the record:
		// escaped, so that they stay in their cells (termsafe.go).
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", termSafe(vm), termSafe(n.ID), n.Backend, termSafe(link), n.Queues, n.MAC, n.Status, termSafe(present))
	}
	tw.Flush()
	gone := 0
	for _, n := range nics {
		fmt.Fprintf(w, "%s: %s\n", n.ID, chainLine(n.Steps))
		if n.Present == "gone" && n.Libvirt == nil { // a libvirt domain's: its own line says detach
			gone++
		}
	}
	if gone > 0 {
		fmt.Fprintf(w, "%d NIC(s) gone from their VM: run netctl gc to delete what netctl created for them and their records (netctl gc --dry-run shows what)\n", gone)
	}
}
