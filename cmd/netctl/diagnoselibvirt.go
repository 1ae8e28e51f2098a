package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/diagnose/gather"
	"github.com/netctl/netctl/qemuproc"
)

// diagnoseLibvirtOptions are netctl diagnose --vm DOMAIN's choices.
type diagnoseLibvirtOptions struct {
	URI, Domain, ID, Lower, Save string
	Monitor, Probe, JSON         bool
	Pool                         *policy.Pool // --plan: hold the NIC against it (needs --qemu-monitor)
}

// libvirtDiagnosis is netctl diagnose --vm DOMAIN --json: libvirt's view,
// and with --qemu-monitor QEMU's explanation of the NIC.
type libvirtDiagnosis struct {
	Libvirt *diagnose.LibvirtReport `json:"libvirt"`
	Explain *diagnose.Report        `json:"explain,omitempty"`
}

// diagnoseLibvirt explains a libvirt domain's NICs: by default from what
// libvirt reports (the live XML) and the host (the tap), saying what only
// QEMU's monitor knows; with o.Monitor also QEMU's answers through
// libvirt's passthrough, which taints the domain (and says so).
func diagnoseLibvirt(ctx context.Context, w io.Writer, o diagnoseLibvirtOptions) error {
	lc, err := libvirtdom.Dial(ctx, o.URI)
	if err != nil {
		return fmt.Errorf("diagnose: %w", err)
	}
	defer lc.Close()
	d, err := lc.Lookup(ctx, o.Domain)
	if err != nil {
		return fmt.Errorf("diagnose: %w", err)
	}
	if up, err := lc.Running(ctx, d); err != nil {
		return fmt.Errorf("diagnose: %w", err)
	} else if !up {
		return fmt.Errorf("diagnose: domain %s is not running: start it (virsh start %s): %w", d.Name, d.Name, errs.ErrNotAvailable)
	}
	b, err := lc.XML(ctx, d, false)
	if err != nil {
		return fmt.Errorf("diagnose: %w", err)
	}
	x, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return fmt.Errorf("diagnose: domain %s: %w", d.Name, err)
	}
	r := &diagnose.LibvirtReport{URI: lc.URI, Domain: d.Name, UUID: d.UUID, NICs: libvirtNICs(x, o.ID)}
	if len(r.NICs) == 0 {
		if o.ID != "" {
			return fmt.Errorf("diagnose: domain %s has no virtio interface with alias %q (virsh domiflist %s shows them): %w", d.Name, o.ID, d.Name, errs.ErrInvalid)
		}
		return fmt.Errorf("diagnose: domain %s has no virtio interface: %w", d.Name, errs.ErrInvalid)
	}
	out := libvirtDiagnosis{Libvirt: r}
	if !o.Monitor {
		r.NeedsMonitor = diagnose.NeedsMonitor
		if o.Save != "" {
			return fmt.Errorf("diagnose: --save writes QEMU's answers, which need --qemu-monitor on a libvirt domain: %w", errs.ErrInvalid)
		}
		return writeLibvirtDiagnosis(w, out, o.JSON)
	}
	if len(r.NICs) > 1 {
		var ids []string
		for _, n := range r.NICs {
			ids = append(ids, n.Alias)
		}
		return fmt.Errorf("diagnose: domain %s has %d virtio interfaces (%s): pick one with --id ALIAS: %w", d.Name, len(ids), strings.Join(ids, ", "), errs.ErrInvalid)
	}
	pid := 0
	if v, err := qemuproc.Find(d.Name); err == nil && v.OfLibvirtDomain(d.UUID) {
		pid = v.PID
	}
	p := lc.Passthrough(d)
	snap, err := gather.GatherVia(ctx, p, pid, gather.Options{ID: r.NICs[0].Alias, Lower: o.Lower, Probe: o.Probe})
	r.Tainted = p.Used()
	if err != nil {
		if r.Tainted {
			return fmt.Errorf("%w (%s)", err, diagnose.TaintedNote)
		}
		return err
	}
	if snap.Tap == nil && r.NICs[0].Tap != nil {
		// QEMU's process was not found here (its fds name the tap):
		// the tap libvirt names, read on this host, is the NIC's.
		snap.Tap = r.NICs[0].Tap
	}
	if o.Save != "" {
		if err := snap.Save(o.Save); err != nil {
			return fmt.Errorf("diagnose: --save: %w", err)
		}
	}
	if out.Explain, err = diagnose.Explain(snap); err == nil && o.Pool != nil {
		out.Explain.CheckPool(o.Pool)
	}
	if err != nil {
		return err
	}
	return writeLibvirtDiagnosis(w, out, o.JSON)
}

func writeLibvirtDiagnosis(w io.Writer, d libvirtDiagnosis, asJSON bool) error {
	if asJSON {
		return printJSON(w, d)
	}
	if d.Explain != nil {
		if err := d.Explain.WriteTable(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return d.Libvirt.WriteTable(w)
}

// maxLibvirtNICs bounds the interfaces read from one domain's XML.
const maxLibvirtNICs = 1024

// libvirtNICs are x's virtio interfaces (only alias id, if given), each
// with its host tap read where it is on this host.
func libvirtNICs(x *libvirtxml.Domain, id string) []diagnose.LibvirtNIC {
	if x == nil || x.Devices == nil {
		return nil
	}
	var out []diagnose.LibvirtNIC
	for i := range x.Devices.Interfaces[:min(len(x.Devices.Interfaces), maxLibvirtNICs)] {
		ifc := &x.Devices.Interfaces[i]
		if ifc.Model == nil || !strings.HasPrefix(ifc.Model.Type, "virtio") {
			continue
		}
		r := libvirtdom.RunsOf(ifc)
		if id != "" && r.Alias != id {
			continue
		}
		n := diagnose.LibvirtNIC{Alias: r.Alias, Model: ifc.Model.Type, Type: r.Type, Target: r.Target, Driver: r.Driver,
			Queues: r.Queues, Offloads: r.Offloads, Runs: r.String()}
		if ifc.MAC != nil {
			n.MAC = ifc.MAC.Address
		}
		switch {
		case r.Type == "vdpa" || r.Type == "user" || r.Type == "other":
		case r.Target == "":
			n.Errors = append(n.Errors, "the host side: libvirt names no target device")
		default:
			s := &diagnose.Snapshot{}
			if err := gather.ReadTap(s, r.Target); err != nil {
				n.Errors = append(n.Errors, fmt.Sprintf("the host side: %v (is it in another network namespace, or on another host?)", err))
			} else {
				n.Tap = s.Tap
			}
		}
		out = append(out, n)
	}
	return out
}
