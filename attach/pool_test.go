package attach

import (
	"strings"
	"testing"

	testpool "github.com/netctl/netctl/test/pool"
)

// TestAttachPinsThePool: attach --plan on the 6.12 host gives device_add
// queue_reset=off (6.1's vhost-net lacks RING_RESET), offers nothing
// outside the plan, and records the pool; without the plan the same host
// offers RING_RESET.
func TestAttachPinsThePool(t *testing.T) {
	pool := testpool.VMKernels(t)
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
