package diagnose

import (
	"slices"
	"strings"
	"testing"

	testpool "github.com/netctl/netctl/test/pool"
)

// TestCheckPoolSaysRingResetIsOutside: a real guest (6.12) on QEMU 7.2's
// userspace virtio-net negotiated RING_RESET; held against the 6.1+6.12
// pool (6.1's vhost-net lacks it) diagnose says the NIC cannot migrate
// within the pool, and why.
func TestCheckPoolSaysRingResetIsOutside(t *testing.T) {
	s, err := Load("testdata/snapshot-qemu-7.2-guest-6.12.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Explain(s)
	if err != nil {
		t.Fatal(err)
	}
	pool := testpool.VMKernels(t)
	r.CheckPool(pool)
	if r.Pool == nil || !slices.Contains(r.Pool.Acked, "RING_RESET") || !strings.Contains(r.Pool.Verdict, "not migratable within the pool") {
		t.Fatalf("pool check %+v", r.Pool)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "note: pool: not migratable within the pool: the guest negotiated RING_RESET, outside plan "+pool.ID) {
		t.Errorf("table:\n%s", b.String())
	}
	// Against a plan of 6.12 alone it is within.
	r2, _ := Explain(s)
	_, only612 := testpool.Of(t, "probe-6.12.json")
	r2.CheckPool(only612)
	if len(r2.Pool.Acked) != 0 || !strings.Contains(r2.Pool.Verdict, "within plan") {
		t.Errorf("6.12-only pool: %+v", r2.Pool)
	}
}
