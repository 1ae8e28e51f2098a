package hostnic

import (
	"context"
	"fmt"
	"strings"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/state"
)

// ProbeSpec says which optional parts Probe runs besides what
// policy.Decide always needs (vhost-net, the tap's offloads, vdpa).
type ProbeSpec struct {
	// QEMU runs the installed QEMU for its version (the hook: libvirt
	// starts that one). attach asks the running QEMU instead.
	QEMU bool
	// Macvtap probes a scratch macvtap's offloads, in a throwaway
	// network namespace.
	Macvtap bool
	// NoVDPA and VhostNetFeaturesOnly leave out what the caller's
	// decision does not use (probe.Parts).
	NoVDPA, VhostNetFeaturesOnly bool
}

// Probe runs probe.ProbeFor. The tap's offloads depend only on the
// running kernel: with a CacheDir they are probed on a scratch tap once
// per boot and kept there (the scratch tap was 15-45 ms of an attach's
// 93 ms on this host, make bench). The probe has no context of its own
// (each of its parts is bounded: the vdpa family by 10 s, QEMU --version
// by 10 s), so it runs on its own goroutine and Probe stops waiting when
// ctx ends; the goroutine finishes by itself.
func (r Real) Probe(ctx context.Context, spec ProbeSpec) (*host.Description, error) {
	parts := probe.Parts{QEMU: spec.QEMU, Macvtap: spec.Macvtap, NoVDPA: spec.NoVDPA, VhostNetFeaturesOnly: spec.VhostNetFeaturesOnly}
	var store *state.Store
	if r.CacheDir != "" {
		if s, err := state.Open(r.CacheDir); err == nil {
			store = s
			var t host.Tap
			if ok, _ := s.LoadBootCache(tapCacheName, &t); ok && validTap(t) {
				parts.Tap = &t
			}
		}
	}
	type result struct {
		d   *host.Description
		err error
	}
	ch := make(chan result, 1)
	go func() {
		d, err := probe.ProbeFor(parts)
		ch <- result{d, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			return nil, res.err
		}
		if store != nil && parts.Tap == nil && validTap(res.d.Tap) {
			store.SaveBootCache(tapCacheName, res.d.Tap) // best effort: the next probe probes again
		}
		return res.d, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the probe (vhost-net, tap offloads, vdpa, QEMU) did not finish in time: %w", ctx.Err())
	}
}

// tapCacheName is the boot cache entry of the tap's offloads.
const tapCacheName = "tap-offloads"

// validTap: a tap section worth keeping or using: available, with no
// error, and offload names netctl knows.
func validTap(t host.Tap) bool {
	if !t.Available || t.Error != "" || len(t.Offloads) > 16 {
		return false
	}
	_, err := macvtap.ParseOffloads(strings.Join(t.Offloads, " "))
	return err == nil
}
