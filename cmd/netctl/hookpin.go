package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/hook"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
)

// pinIface is one interface in hook pin's report.
type pinIface struct {
	MAC     string `json:"mac"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Backend string `json:"backend,omitempty"`
	Before  string `json:"driver_before,omitempty"`
	After   string `json:"driver_after,omitempty"`
	// Override are the QEMU properties written as <qemu:override> on
	// Alias (AliasAdded: netctl gave the interface that alias), for what
	// <driver> has no attribute for; OverrideKept says why none were
	// written (the domain's own override says otherwise).
	Override     map[string]bool `json:"qemu_override,omitempty"`
	Alias        string          `json:"alias,omitempty"`
	AliasAdded   bool            `json:"alias_added,omitempty"`
	OverrideKept string          `json:"qemu_override_kept,omitempty"`
	Unexpressed  []string        `json:"not_in_libvirt_xml,omitempty"`
	Skipped      string          `json:"skipped,omitempty"`
}

// pinReport is hook pin's result.
type pinReport struct {
	Domain     string     `json:"domain"`
	UUID       string     `json:"uuid"`
	Interfaces []pinIface `json:"interfaces"`
	Defined    bool       `json:"defined"`
	DryRun     bool       `json:"dry_run,omitempty"`
}

func hookPinCommand() *cli.Command {
	const path = "netctl hook pin"
	return &cli.Command{
		Name:      "pin",
		Usage:     "write the hook's decisions (<driver> name, queues, offloads) into a domain's persistent definition",
		ArgsUsage: "DOMAIN",
		Description: "For each interface the hook manages in DOMAIN's persistent definition (name or UUID), netctl decides as the\n" +
			"hook's prepare does and writes the decided <driver name='vhost'|'qemu'>, queues and <host/>/<guest/> offload\n" +
			"attributes into that definition (virsh define), changing nothing else, so that libvirt starts QEMU with exactly\n" +
			"what netctl decided at the next start. A QEMU property <driver> has no attribute for (queue_reset, host_uso,\n" +
			"guest_uso4/6: what a pool's plan turns off) goes into <qemu:override> (libvirt 8.2+) on the interface's alias;\n" +
			"an interface without a user alias gets ua-netctl-MAC. An override the domain already has is never rewritten.\n" +
			"What libvirt's XML cannot express at all (vhost-net busy polling) is listed. A domain or interface netctl does\n" +
			"not manage is never touched. --dry-run prints the diff.\n" +
			"The hook honours a <driver name> and forced offloads in the definition, and a pin writes both: after a host\n" +
			"change (vhost_net loaded, a newer kernel) or a new profile, pin --redecide decides without them.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "libvirt", Aliases: []string{"c", "connect"}, Value: libvirtdom.DefaultURI, Usage: "libvirt URI (as virsh -c): qemu:///system or qemu+unix:///system?socket=PATH"},
			&cli.StringFlag{Name: "config", Usage: "the hook's host config (default: $NETCTL_HOOK_CONFIG, else " + hook.DefaultConfigPath + ")"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would change and define nothing"},
			&cli.BoolFlag{Name: "redecide", Usage: "decide as if the managed interfaces had no <driver name> and no <host/>/<guest/> offload attributes (an earlier pin's, or the user's own)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long"},
			&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr(path, "give one domain (name or UUID)")
			}
			if c.Duration("timeout") <= 0 {
				return usageErr(path, "--timeout %s: use a positive duration", c.Duration("timeout"))
			}
			cfgPath := c.String("config")
			if cfgPath == "" {
				cfgPath = hookConfigPath()
			}
			cfg, err := hook.LoadConfig(cfgPath)
			if err != nil {
				return err
			}
			ctx, interrupted, stop := interruptible(c.Duration("timeout"))
			defer stop()
			rep, notes, err := hookPin(ctx, c.String("libvirt"), cfg, c.Args().First(), c.Bool("dry-run"), c.Bool("redecide"))
			if err != nil {
				return interruptedErr("hook pin", interrupted, err)
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, rep)
			}
			printPin(&safeWriter{w: c.App.Writer}, rep, notes)
			return nil
		},
	}
}

// hookPin pins the decisions into domain ref's persistent definition.
// notes are lines for people (the running domain, nothing to do).
//
// The hook decides from the definition, so the <driver> name and offload
// attributes a pin wrote are what the next decision starts from (they
// read as the user's own choice): with redecide the decision is made on
// the definition without them (libvirtdom.Unpin), as on the first pin.
func hookPin(ctx context.Context, uri string, cfg *hook.Config, ref string, dryRun, redecide bool) (*pinReport, []string, error) {
	conn, err := libvirtdom.Dial(ctx, uri)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	dom, err := conn.Lookup(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	persistent, err := conn.Persistent(ctx, dom)
	switch {
	case err != nil:
		return nil, nil, err
	case !persistent && !dryRun:
		return nil, nil, fmt.Errorf("domain %s is transient (virsh create): it has no persistent definition to pin, and defining one would make it persistent; "+
			"define it (virsh define FILE) and pin that, or start it from XML with the <driver> that netctl hook pin --dry-run shows: %w", dom.Name, errs.ErrNotAvailable)
	}
	before, err := conn.Definition(ctx, dom)
	if err != nil {
		return nil, nil, err
	}
	decideOn := before
	if redecide {
		if decideOn, err = libvirtdom.Unpin(before); err != nil {
			return nil, nil, fmt.Errorf("domain %s: %w", dom.Name, err)
		}
	}
	// Decide for the QEMU libvirt starts the domain with: the pin writes
	// QEMU properties (<qemu:override>), and QEMU refuses to start with
	// one it lacks (host_uso before 8.2), whatever QEMU is in PATH.
	version, err := conn.HypervisorVersion(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("asking libvirt for its QEMU's version: %w", err)
	}
	h := &hook.Hook{Config: cfg, Devices: hook.RealDevices{}, Log: io.Discard, QEMUVersion: version}
	_, ds, err := h.Decide(ctx, decideOn)
	if err != nil {
		return nil, nil, fmt.Errorf("domain %s: %w", dom.Name, err)
	}
	rep := &pinReport{Domain: dom.Name, UUID: dom.UUID, Interfaces: []pinIface{}, DryRun: dryRun}
	if len(ds) == 0 {
		return rep, []string{"netctl manages no interface of domain " + dom.Name + ": its definition is left as it is"}, nil
	}
	byMAC := map[string]int{} // MAC -> index in ds and in rep.Interfaces
	for _, d := range ds {
		it := d.Interface
		pi := pinIface{Kind: string(it.Kind), Name: it.Name, Backend: d.Decision.Backend, Skipped: d.Skip}
		if it.MAC == nil {
			pi.Skipped = "no <mac address> in the definition to find it by"
		} else {
			pi.MAC = it.MAC.String()
		}
		if pi.Skipped == "" {
			byMAC[pi.MAC] = len(rep.Interfaces)
		}
		rep.Interfaces = append(rep.Interfaces, pi)
	}
	// managedIndex is the index in ds of x, when netctl pins it.
	managedIndex := func(x *libvirtxml.DomainInterface) (int, bool) {
		if x.MAC == nil {
			return 0, false
		}
		m, err := net.ParseMAC(x.MAC.Address)
		if err != nil {
			return 0, false
		}
		i, ok := byMAC[m.String()]
		return i, ok && pinsInterface(x, ds[i].Interface)
	}
	overrides := map[int]map[string]bool{}
	aliases := map[int]string{} // the interface's alias in the definition
	after, changes, err := libvirtdom.Pin(before, func(x *libvirtxml.DomainInterface) *libvirtxml.DomainInterfaceDriver {
		i, ok := managedIndex(x)
		if !ok {
			return nil
		}
		p := libvirtdom.DriverFor(x.Driver, ds[i].Decision, 0)
		rep.Interfaces[i].Unexpressed = p.Unexpressed
		overrides[i], aliases[i] = p.Override, libvirtdom.Alias(x)
		return p.Driver
	})
	if err != nil {
		return nil, nil, fmt.Errorf("domain %s: %w", dom.Name, err)
	}
	for _, ch := range changes {
		m, _ := net.ParseMAC(ch.MAC)
		if i, ok := byMAC[m.String()]; ok {
			rep.Interfaces[i].Before, rep.Interfaces[i].After = ch.Before, ch.After
		}
	}
	// What <driver> cannot say (queue_reset, the USO bits) goes into
	// <qemu:override> on the interface's alias, which QEMU gets when the
	// domain starts.
	var ovChanges []libvirtdom.OverrideChange
	if persistent {
		after, ovChanges, err = libvirtdom.Override(after, func(x *libvirtxml.DomainInterface) map[string]bool {
			if i, ok := managedIndex(x); ok {
				return overrides[i]
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("domain %s: %w", dom.Name, err)
		}
	} else {
		// A transient domain's XML (a dry run's: nothing is defined) is
		// the live one, with the aliases libvirt made (net0): say the
		// override to create it with, on the alias a pin would give.
		for _, i := range slices.Sorted(maps.Keys(overrides)) {
			if len(overrides[i]) == 0 {
				continue
			}
			ch := libvirtdom.OverrideChange{MAC: rep.Interfaces[i].MAC, Alias: aliases[i], Props: overrides[i]}
			if !strings.HasPrefix(ch.Alias, libvirtdom.UserAliasPrefix) {
				ch.Alias, ch.Added = libvirtdom.UserAliasPrefix+"netctl-"+strings.ReplaceAll(ch.MAC, ":", ""), true
			}
			ovChanges = append(ovChanges, ch)
		}
	}
	written := 0
	var kept []string // the interfaces whose override the domain's own keeps
	for _, ch := range ovChanges {
		i, ok := byMAC[ch.MAC]
		if !ok {
			continue
		}
		it := &rep.Interfaces[i]
		it.Alias, it.AliasAdded, it.Override, it.OverrideKept = ch.Alias, ch.Added, ch.Props, ch.Kept
		if ch.Kept == "" {
			written++
		} else {
			kept = append(kept, ch.MAC)
		}
	}
	var notes []string
	if len(kept) > 0 {
		notes = append(notes, fmt.Sprintf("interface %s does not hold the pool's plan: the domain's own <qemu:override> says otherwise (above), which netctl does not rewrite", strings.Join(kept, ", ")))
	}
	switch {
	case len(changes) == 0 && written == 0 && len(kept) > 0:
		notes = append(notes, "nothing to define")
		return rep, notes, nil
	case len(changes) == 0 && written == 0:
		notes = append(notes, "domain "+dom.Name+" is pinned already: nothing to define")
		return rep, notes, nil
	case dryRun:
		notes = append(notes, "dry run: nothing defined")
		return rep, notes, nil
	}
	if _, err := conn.Define(ctx, after); err != nil {
		return nil, nil, fmt.Errorf("domain %s: defining the pinned definition: %w", dom.Name, err)
	}
	rep.Defined = true
	notes = append(notes, "defined: libvirt starts the domain with these at its next start")
	if running, err := conn.Running(ctx, dom); err == nil && running {
		notes = append(notes, "domain "+dom.Name+" runs now with what it started with (netctl hook status "+dom.Name+" shows what runs)")
	}
	return rep, notes, nil
}

func printPin(w io.Writer, rep *pinReport, notes []string) {
	for _, it := range rep.Interfaces {
		fmt.Fprintf(w, "interface %s (%s %s)", firstNonEmptyStr(it.MAC, "without MAC"), it.Kind, it.Name)
		if it.Skipped != "" {
			fmt.Fprintf(w, ": not pinned: %s\n", it.Skipped)
			continue
		}
		fmt.Fprintf(w, ": backend %s\n", it.Backend)
		switch {
		case it.After == "":
			fmt.Fprintf(w, "  <driver> already as decided\n")
		default:
			for _, l := range strings.Split(strings.TrimSpace(firstNonEmptyStr(it.Before, "(no <driver>)")), "\n") {
				fmt.Fprintf(w, "  - %s\n", strings.TrimSpace(l))
			}
			fmt.Fprintf(w, "  + %s\n", it.After)
		}
		if len(it.Override) > 0 {
			var ps []string
			for _, p := range slices.Sorted(maps.Keys(it.Override)) {
				ps = append(ps, fmt.Sprintf("%s=%t", p, it.Override[p]))
			}
			fmt.Fprintf(w, "  + <qemu:override> on alias %s: %s\n", it.Alias, strings.Join(ps, " "))
		}
		switch {
		case it.AliasAdded && len(it.Override) > 0:
			fmt.Fprintf(w, "  + <alias name='%s'/> (the override's handle on this interface)\n", it.Alias)
		case it.AliasAdded && it.OverrideKept == "":
			fmt.Fprintf(w, "  + <alias name='%s'/> (the domain's <qemu:override> on that alias, which named no device, now applies to this interface)\n", it.Alias)
		}
		if it.OverrideKept != "" {
			fmt.Fprintf(w, "  <qemu:override> not written: %s\n", it.OverrideKept)
		}
		for _, u := range it.Unexpressed {
			fmt.Fprintf(w, "  not in libvirt's XML: %s\n", u)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

func firstNonEmptyStr(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

// pinsInterface says whether x, an interface of the definition with the
// MAC of the decided interface it, is that interface: of its type (a
// tap is type='ethernet' on target dev it.Name, a direct one type='direct'
// on lower device it.Name). Another interface that shares the MAC (a
// bridge's, which netctl does not manage) is not pinned.
func pinsInterface(x *libvirtxml.DomainInterface, it hook.Interface) bool {
	if x.Source == nil {
		return false
	}
	switch it.Kind {
	case hook.KindTap:
		return x.Source.Ethernet != nil && (it.Name == "" || x.Target != nil && x.Target.Dev == it.Name)
	case hook.KindDirect:
		return x.Source.Direct != nil && (it.Name == "" || x.Source.Direct.Dev == it.Name)
	}
	return false
}
