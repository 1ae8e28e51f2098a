package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/virtio"
)

// Pool is a plan applied on one host: the features a VM that may migrate
// among the plan's hosts is offered at most. Decide leaves out every
// managed bit outside Offer (with its QEMU property), refuses a request
// that insists on one, and notes the plan's bits this host cannot carry
// (a VM that started elsewhere with them cannot migrate here).
type Pool struct {
	ID    string          // the plan's feature set id (FeatureSetID)
	Offer virtio.Features // the plan's safe set
	Hosts []string        // the plan's hosts, for the reasons
}

// MaxPlanFile bounds a plan file read from outside (netctl plan -j writes
// a few KiB; 1024 hosts with long reasons stay well under).
const MaxPlanFile = 4 << 20

// FeatureSetID names a feature set: equal on hosts that offer the same
// set, short enough for a Kubernetes label value. "fs-" and the feature
// word in hex.
func FeatureSetID(f virtio.Features) string { return fmt.Sprintf("fs-%x", uint64(f)) }

// managedMask is every bit Decide and Plan decide about.
var managedMask = func() (m virtio.Features) {
	for _, b := range managed {
		m |= b.f
	}
	return m
}()

// ParsePlanFile reads netctl plan -j's output (a PlanResult) and returns
// the pool it pins: its offer names must all be features netctl knows and
// its id must be the one FeatureSetID gives for them (a hand-edited offer
// with a stale id is refused: say which). Errors wrap ErrInvalid.
func ParsePlanFile(b []byte) (*Pool, error) {
	if len(b) > MaxPlanFile {
		return nil, fmt.Errorf("policy: a plan of %d bytes: more than %d, so not netctl plan -j's output: %w", len(b), MaxPlanFile, ErrInvalid)
	}
	var p PlanResult
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: not a plan (write one with netctl plan -j HOST.json... > POOL.json): %w: %w", err, ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("policy: a plan file holds one plan (netctl plan -j's output), and this one has more after it: %w", ErrInvalid)
	}
	if len(p.Hosts) == 0 || p.Offer == nil {
		return nil, fmt.Errorf("policy: the plan names no hosts or no offer: write it with netctl plan -j HOST.json... > POOL.json: %w", ErrInvalid)
	}
	if len(p.Hosts) > MaxHosts {
		return nil, fmt.Errorf("policy: the plan names %d hosts, more than %d: %w", len(p.Hosts), MaxHosts, ErrInvalid)
	}
	var offer virtio.Features
	for _, n := range p.Offer {
		f, ok := virtio.ParseFeature(n)
		if !ok {
			return nil, fmt.Errorf("policy: the plan offers %.40q, which is no virtio feature netctl knows: %w", n, ErrInvalid)
		}
		offer |= f
	}
	if id := FeatureSetID(offer); p.ID != "" && p.ID != id {
		return nil, fmt.Errorf("policy: the plan's id %.40q is not its offer's (%s): the file was edited; write it again with netctl plan -j: %w", p.ID, id, ErrInvalid)
	}
	for _, h := range p.Hosts {
		if h == "" || len(h) > 253 || strings.ContainsFunc(h, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			return nil, fmt.Errorf("policy: the plan names a host %.40q that is no hostname: %w", h, ErrInvalid)
		}
	}
	return &Pool{ID: FeatureSetID(offer), Offer: offer, Hosts: slices.Clone(p.Hosts)}, nil
}

// poolReason is why Decide leaves out a bit the pool's plan leaves out.
func (p *Pool) reason() string {
	return fmt.Sprintf("outside the pool's plan %s (what every one of its %d hosts carries; netctl plan says which host lacks it)", p.ID, len(p.Hosts))
}

// String names the pool for notes and records.
func (p *Pool) String() string {
	if p == nil {
		return ""
	}
	return p.ID
}

// Outside is what of f the pool leaves out, among the bits netctl
// decides about.
func (p *Pool) Outside(f virtio.Features) virtio.Features { return f & managedMask &^ p.Offer }

// Managed is every bit Decide and Plan decide about (each has a QEMU
// property that turns it off).
func Managed() virtio.Features { return managedMask }
