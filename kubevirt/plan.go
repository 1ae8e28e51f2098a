package kubevirt

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
)

// Plan is a pool's plan (netctl plan -j's output) as the sidecar pins
// it: the offer every node of the pool honours, and the QEMU properties
// that turn the rest off.
type Plan struct {
	Pool *policy.Pool
	// QEMU are the plan's properties: those for every host and, as
	// policy's libvirt pin does, those only some hosts' QEMU has (the
	// hosts without the property do not offer the feature).
	QEMU map[string]string
}

// ParsePlan reads netctl plan -j's output (bounded by policy.MaxPlanFile)
// as policy.ParsePlanFile checks it.
func ParsePlan(b []byte) (*Plan, error) {
	pool, err := policy.ParsePlanFile(b)
	if err != nil {
		return nil, err
	}
	var res policy.PlanResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("not a plan: %w: %w", err, errs.ErrInvalid)
	}
	props := maps.Clone(res.QEMU)
	if props == nil {
		props = map[string]string{}
	}
	for _, m := range res.QEMUByHost {
		maps.Copy(props, m)
	}
	return &Plan{Pool: pool, QEMU: props}, nil
}

// decision is the plan as a decision for one interface on backend: what
// libvirtdom.DriverFor turns into <driver> attributes and overrides.
func (p *Plan) decision(backend string) policy.Decision {
	return policy.Decision{Backend: backend, Offer: p.Pool.Offer, QEMU: p.QEMU}
}
