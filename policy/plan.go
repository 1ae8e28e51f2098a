package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// MaxHosts bounds the hosts one Plan takes.
const MaxHosts = 1024

// Difference is one feature some hosts offer and others do not, one that
// every host offers but the plan cannot (its requirement is not safe), or
// one netctl manages (it has a QEMU property) that no host offers.
type Difference struct {
	Feature string            `json:"feature"`
	Missing map[string]string `json:"missing_on,omitempty"` // host -> reason
	Reason  string            `json:"reason,omitempty"`     // why the plan drops it beyond Missing
}

// PlanResult is the feature set safe to offer on every host, and the QEMU
// properties that enforce it.
type PlanResult struct {
	// ID names the safe set (FeatureSetID): equal for pools that carry
	// the same set; attach --plan checks it against Offer.
	ID          string            `json:"id"`
	Hosts       []string          `json:"hosts"`    // by hostname, sorted
	Backends    map[string]string `json:"backends"` // host -> backend Decide chose there
	Offer       []string          `json:"offer"`
	Differences []Difference      `json:"differences"`
	// QEMU are the virtio-net-pci properties to set on every host: each
	// feature the plan leaves out, ring features included.
	QEMU map[string]string `json:"qemu_props"`
	// QEMUByHost are properties only some hosts' QEMU has: set them there
	// only (the others' QEMU does not offer the feature anyway).
	QEMUByHost map[string]map[string]string `json:"qemu_props_by_host,omitempty"`
	// Unavailable: property -> the hosts whose QEMU lacks it, and why
	// leaving it out there is safe.
	Unavailable map[string]string `json:"qemu_props_unavailable,omitempty"`
	// Libvirt is the same pin as a domain's <interface> says it.
	Libvirt LibvirtPin `json:"libvirt"`
	Notes   []string   `json:"notes,omitempty"`
	// VDPAMigration: host -> why the vdpa device Decide chose there
	// cannot live-migrate with that host's QEMU (also in Notes).
	VDPAMigration map[string]string `json:"vdpa_migration,omitempty"`
}

// Plan decides for each host with the same request and returns the
// features all of them honour, closed under the spec's Requirements: what a
// VM that may live-migrate among them can be offered. Hosts are known by
// their hostname; none, more than MaxHosts, or two with the same hostname
// are an error wrapping ErrInvalid.
func Plan(hosts []*host.Description, req Request) (PlanResult, error) {
	res := PlanResult{Backends: map[string]string{}, QEMU: map[string]string{}, Differences: []Difference{}}
	if len(hosts) == 0 {
		return res, fmt.Errorf("policy: plan: no hosts: name the probe files of the hosts (netctl probe -j > HOST.json on each): %w", ErrInvalid)
	}
	if len(hosts) > MaxHosts {
		return res, fmt.Errorf("policy: plan: %d hosts: use 1 to %d: %w", len(hosts), MaxHosts, ErrInvalid)
	}
	// The request is checked once, so that its mistakes are not blamed on
	// the first host (Decide checks it again; check only fills defaults).
	if err := req.check(); err != nil {
		return res, err
	}
	byName := map[string]*host.Description{}
	for i, h := range hosts {
		if h == nil {
			return res, fmt.Errorf("policy: plan: host %d has no description: %w", i, ErrInvalid)
		}
		if err := h.Validate(); err != nil {
			return res, fmt.Errorf("policy: plan: host %d: %w", i, err)
		}
		if _, dup := byName[h.Hostname]; dup {
			return res, fmt.Errorf("policy: plan: two probes of host %s: give each host once: %w", h.Hostname, ErrInvalid)
		}
		byName[h.Hostname] = h
		res.Hosts = append(res.Hosts, h.Hostname)
	}
	slices.Sort(res.Hosts)
	all := virtio.Features(^uint64(0))
	var union virtio.Features
	decisions := map[string]Decision{}
	for _, n := range res.Hosts {
		d, err := Decide(byName[n], req)
		if err != nil {
			return res, fmt.Errorf("host %s: %w", n, err)
		}
		decisions[n] = d
		res.Backends[n] = d.Backend
		all &= d.Offer
		union |= d.Offer
		for _, note := range d.Notes {
			res.Notes = append(res.Notes, n+": "+note)
		}
		res.noteVDPAMigration(n, byName[n], d, req)
	}
	// Each host's set is closed; their intersection need not be (GUEST_ECN
	// with TSO4 on one host and TSO6 on the other).
	closed := map[virtio.Features]string{}
	safe := Close(all, func(f virtio.Features, needs string) {
		closed[f] = "needs " + needs + " (virtio spec 5.1.3.1), which is not offered on every host"
	})
	res.Offer = safe.Names()
	res.ID = FeatureSetID(safe)
	// A managed bit no host offers is dropped too (its property is still
	// set, so that a QEMU that would offer it does not): it gets its row,
	// missing on every host with each host's reason.
	var noHost virtio.Features
	for _, m := range managed {
		noHost |= m.f
	}
	noHost &^= union
	for _, b := range (union&^safe | noHost).Bits() {
		f := virtio.Bit(b)
		diff := Difference{Feature: virtio.BitName(b), Reason: closed[f]}
		for _, n := range res.Hosts {
			if !decisions[n].Offer.Has(f) {
				if diff.Missing == nil {
					diff.Missing = map[string]string{}
				}
				diff.Missing[n] = firstNonEmpty(decisions[n].Dropped[diff.Feature], "not offered")
			}
		}
		res.Differences = append(res.Differences, diff)
	}
	// Every managed feature outside the safe set becomes a property, on
	// the hosts whose QEMU has it.
	for _, m := range managed {
		if safe.Has(m.f) {
			continue
		}
		var have, lack []string
		for _, n := range res.Hosts {
			if why, no := decisions[n].Unavailable[m.prop]; no {
				lack = append(lack, n+" ("+why+")")
			} else {
				have = append(have, n)
			}
		}
		switch {
		case len(lack) == 0:
			res.QEMU[m.prop] = m.value
		case len(have) == 0:
			res.setUnavailable(m.prop, lack)
		default:
			res.setUnavailable(m.prop, lack)
			for _, n := range have {
				if res.QEMUByHost == nil {
					res.QEMUByHost = map[string]map[string]string{}
				}
				if res.QEMUByHost[n] == nil {
					res.QEMUByHost[n] = map[string]string{}
				}
				res.QEMUByHost[n][m.prop] = m.value
			}
		}
	}
	if safe.Has(virtio.NetMQ) {
		res.QEMU["mq"] = "on"
	}
	res.Libvirt = libvirtPin(res.QEMU, res.QEMUByHost)
	return res, nil
}

func (res *PlanResult) setUnavailable(prop string, lack []string) {
	if res.Unavailable == nil {
		res.Unavailable = map[string]string{}
	}
	res.Unavailable[prop] = "not on " + strings.Join(lack, "; ")
}
