package attach

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
)

// poolFor is the 6.1+6.12 VM kernels' plan, as attach --plan reads it.
func poolFor(t *testing.T) *policy.Pool {
	t.Helper()
	var hs []*host.Description
	for _, f := range []string{"probe-6.1.json", "probe-6.12.json"} {
		b, err := os.ReadFile("../policy/testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	plan, err := policy.Plan(hs, policy.Request{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plan)
	pool, err := policy.ParsePlanFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestAttachPinsThePool: attach --plan on the 6.12 host gives device_add
// queue_reset=off (6.1's vhost-net lacks RING_RESET), offers nothing
// outside the plan, and records the pool; without the plan the same host
// offers RING_RESET.
func TestAttachPinsThePool(t *testing.T) {
	pool := poolFor(t)
	for _, pinned := range []bool{false, true} {
		q, h, dir := newFakeQEMU(t), newFakeHost(t, "probe-6.12.json"), t.TempDir()
		req := Request{QMP: q.sock, ID: "net1", Backend: "userspace", StateDir: dir, Host: h}
		if pinned {
			req.Pool = pool
		}
		nic, err := Attach(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		hasRR := strings.Contains(strings.Join(nic.Features, " "), "RING_RESET")
		if pinned {
			if nic.Properties["queue_reset"] != "off" || hasRR || nic.Pool != pool.ID {
				t.Errorf("pinned: properties %v, features %v, pool %q", nic.Properties, nic.Features, nic.Pool)
			}
		} else if !hasRR || nic.Properties["queue_reset"] != "" || nic.Pool != "" {
			t.Errorf("unpinned: properties %v, features %v, pool %q", nic.Properties, nic.Features, nic.Pool)
		}
	}
}
