package kubevirt

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
)

// Plan is a pool's plan (netctl plan -j's output) as the sidecar pins
// it: the offer every node of the pool honours, and the QEMU properties
// that turn the rest off.
type Plan struct {
	Pool *policy.Pool
	// QEMU are the plan's properties: those for every host and those
	// only some hosts' QEMU has (the hosts without the property do not
	// offer the feature). In a KubeVirt pod the QEMU is virt-launcher's,
	// not the one the nodes' probes saw, so each is written unless the
	// sidecar knows virt-launcher's QEMU lacks it (Config.QEMU).
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
	p := &Plan{Pool: pool, QEMU: map[string]string{}}
	maps.Copy(p.QEMU, res.QEMU)
	for _, m := range res.QEMUByHost {
		maps.Copy(p.QEMU, m)
	}
	return p, nil
}

// decision is the plan as a decision for one interface on backend: what
// libvirtdom.DriverFor turns into <driver> attributes and overrides.
// qemu is virt-launcher's QEMU version ("" unknown): a property that
// version lacks is left out (that QEMU does not offer the feature,
// and would refuse the property), and notes say so.
func (p *Plan) decision(backend, qemu string) (policy.Decision, []string) {
	props := map[string]string{}
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(p.QEMU)) {
		if has, known := policy.QEMUHasProp(qemu, k); known && !has {
			notes = append(notes, fmt.Sprintf("QEMU property %s=%s left out: virt-launcher's QEMU %s has no such property, so it does not offer the feature", k, p.QEMU[k], qemu))
			continue
		}
		props[k] = p.QEMU[k]
	}
	return policy.Decision{Backend: backend, Offer: p.Pool.Offer, QEMU: props}, notes
}
