package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// PoolCheck is a running NIC held against a pool's plan (diagnose --plan).
type PoolCheck struct {
	ID string `json:"id"`
	// Acked are bits the guest negotiated that the plan leaves out: a
	// migration to a host of the pool without them fails at its very end.
	Acked []string `json:"acked_outside,omitempty"`
	// Offered are bits the device offers outside the plan that the guest
	// did not take (yet: a driver reset may).
	Offered []string `json:"offered_outside,omitempty"`
	Verdict string   `json:"verdict"`
}

// CheckPool holds r's negotiated and offered features against the pool
// and says what is outside it, in r.Pool and a note.
func (r *Report) CheckPool(pool *policy.Pool) {
	host, hok := parseWord(r.Host)
	guest, gok := parseWord(r.Guest)
	negotiated := r.Negotiated()
	c := &PoolCheck{ID: pool.ID}
	r.Pool = c
	if !hok {
		c.Verdict = "unknown: QEMU did not say what the device offers"
		return
	}
	if negotiated && gok {
		c.Acked = orEmpty(pool.Outside(guest).Names())
	}
	c.Offered = orEmpty(pool.Outside(host &^ guest).Names())
	if !negotiated || !gok {
		c.Offered = orEmpty(pool.Outside(host).Names())
		c.Acked = nil
	}
	switch {
	case len(c.Acked) > 0:
		c.Verdict = fmt.Sprintf("not migratable within the pool: the guest negotiated %s, outside plan %s: a migration to a host of the pool that lacks it fails at the end "+
			"(QEMU: Features 0x... unsupported); attach the NIC again with --plan (or pin the domain's <driver>) and reboot the guest's driver", strings.Join(c.Acked, " "), pool.ID)
	case len(c.Offered) > 0:
		c.Verdict = fmt.Sprintf("at risk: the device offers %s outside plan %s; the guest has not negotiated it, but a driver reset may: attach the NIC again with --plan", strings.Join(c.Offered, " "), pool.ID)
	case !negotiated:
		c.Verdict = fmt.Sprintf("within plan %s: the device offers nothing outside it (the guest has not negotiated yet)", pool.ID)
	default:
		c.Verdict = fmt.Sprintf("within plan %s: the guest negotiated nothing outside it", pool.ID)
	}
	r.Notes = append(r.Notes, "pool: "+c.Verdict)
}

func parseWord(w Word) (virtio.Features, bool) {
	var v uint64
	if _, err := fmt.Sscanf(w.Hex, "0x%x", &v); err != nil {
		return 0, false
	}
	return virtio.Features(v), true
}

// Negotiated says whether the guest's driver has negotiated (FEATURES_OK
// or DRIVER_OK).
func (r *Report) Negotiated() bool {
	return slices.Contains(r.Status, "FEATURES_OK") || slices.Contains(r.Status, "DRIVER_OK")
}

// Words are the device's offered and the guest's acknowledged features
// as QEMU reported them; ok is false when QEMU did not say them.
func (r *Report) Words() (offered, acked virtio.Features, ok bool) {
	h, hok := parseWord(r.Host)
	g, gok := parseWord(r.Guest)
	return h, g, hok && gok
}
