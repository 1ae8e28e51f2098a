package hook

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy"
)

// Decided is the hook's decision for one interface it manages, made
// without creating anything (for netctl hook pin).
type Decided struct {
	Interface Interface
	Decision  policy.Decision
	// Skip says why the interface has no decision here ("" when it has
	// one): a vdpa interface is decided at prepare from the features of
	// the device prepare creates.
	Skip string
}

// Decide decides about every interface netctl manages in domainXML the
// way prepare does (ParsePlan under h.Config, one h.Devices.Probe, the
// same decide per interface, for h.QEMUVersion when set), creating
// nothing and calling no one: the plan and one Decided per planned
// interface, in the plan's order. A
// domain netctl manages nothing in gives a plan without interfaces. A
// refusal is prepare's own error line.
func (h *Hook) Decide(ctx context.Context, domainXML []byte) (*Plan, []Decided, error) {
	if h.Config == nil {
		return nil, nil, errors.New("hook: no host config")
	}
	p, err := ParsePlan(domainXML, h.Config)
	if err != nil {
		return nil, nil, err
	}
	if len(p.Interfaces) == 0 {
		return p, nil, nil
	}
	desc, err := h.Devices.Probe(ctx, hostnic.ProbeSpec{QEMU: true, Macvtap: slices.ContainsFunc(p.Interfaces, func(it Interface) bool { return it.Kind == KindDirect })})
	if err != nil {
		return nil, nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	if h.QEMUVersion != "" {
		d := *desc
		d.QEMU.Version, d.QEMU.Error = h.QEMUVersion, ""
		desc = &d
	}
	out := make([]Decided, 0, len(p.Interfaces))
	for i, it := range p.Interfaces {
		if it.Kind == KindVDPA {
			out = append(out, Decided{Interface: it, Skip: "a vdpa interface runs what its device offers; netctl decides it when prepare creates the device"})
			continue
		}
		d, err := decide(desc, p.Type, it, nil, h.Config.Pool(), ifaceName(it.MAC, i))
		if err != nil {
			return nil, nil, fmt.Errorf("domain %s: %w", p.Domain, err)
		}
		out = append(out, Decided{Interface: it, Decision: d})
	}
	return p, out, nil
}
