//go:build review

// These tests show three known ways the ring counters still go wrong
// (issue 20 section 4, found by the session's review, not fixed yet):
// they FAIL today, so they are built only with -tags review
// (go test -tags review -run TestReview ./stats). Fix one, then drop it
// from this file into the package's normal tests.

package stats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// TestReviewResetSamePlaceUnseen (review finding, NOT FIXED: this test
// fails): the guest resets the device between two collections (a
// virtio_net reload) and its driver sets up the new rings at the same
// guest-physical pages (Linux's page allocator hands the freed pages
// back first), with no read of the sampler in the short window where
// they are zero. The old rings were past half the index range (40010,
// 40000); the new ones are at (256, 3). Every step is "forward" by less
// than half a turn (25782, 25539), every header is a valid split ring's,
// the status and the addresses are the same, so both the sampler and the
// validated collection count a jump of about 25,600 that never happened.
// Nothing over QMP tells this reset from traffic while vhost runs; see
// the review report for what could.
func TestReviewResetSamePlaceUnseen(t *testing.T) {
	for _, sampler := range []bool{true, false} {
		name := "collect only"
		if sampler {
			name = "with sampler"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeVM(t, 1, false)
			c := NewCollector(Options{Deadline: 10 * time.Second})
			tg := fakeTarget(f, policy.BackendUserspace)
			f.setIdx(0, 40000, 39990)
			f.setIdx(1, 500, 500)
			base := c.Collect(ctx, []Target{tg})[0]
			f.setIdx(0, 40010, 40000)
			if sampler {
				c.Sample()
			}
			// The reset: new rings at the same place, already in use.
			f.setIdx(0, 256, 3)
			if sampler {
				c.Sample()
			}
			s := c.Collect(ctx, []Target{tg})[0]
			want := [][2]uint64{{10 + 256, 10 + 3}, {0, 0}}
			got := grew(base, s)
			if !equal(got, want) && !(len(got) == 2 && got[0][0] <= want[0][0] && got[0][1] <= want[0][1]) {
				t.Errorf("grew %v (missing %v), want at most %v: a reset between collections added a jump", got, s.Missing, want)
			}
		})
	}
}

// TestReviewLoadvmGoesBack (review finding, NOT FIXED: this test fails):
// loadvm (virsh snapshot-revert of a running domain with an internal
// snapshot) restores guest memory in the same QEMU: the rings are where
// they were, the status is the same, and their indices go back to what
// they were when the snapshot was taken (here from 40000 to 30000).
// Nothing was sent or received. The sampler sees the step back (more
// than half a turn forward) and makes the ring suspect; the collection
// then finds the rings where they were and takes it as a device reset:
// "the new rings count from 0", which adds the restored raw index
// (30000) as traffic. Without the sampler the validated collection adds
// the step back taken forward (55536). Either way a jump that never
// happened; what was restored should be the new base.
func TestReviewLoadvmGoesBack(t *testing.T) {
	for _, sampler := range []bool{true, false} {
		name := "collect only"
		if sampler {
			name = "with sampler"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeVM(t, 1, false)
			c := NewCollector(Options{Deadline: 10 * time.Second})
			tg := fakeTarget(f, policy.BackendUserspace)
			f.setIdx(0, 40000, 39990)
			f.setIdx(1, 500, 500)
			base := c.Collect(ctx, []Target{tg})[0]
			f.setIdx(0, 30000, 29990) // loadvm
			f.setIdx(1, 400, 400)
			if sampler {
				c.Sample()
			}
			s := c.Collect(ctx, []Target{tg})[0]
			for i, g := range grew(base, s) {
				if g[0] > 1000 || g[1] > 1000 {
					t.Errorf("queue %d grew %v (missing %v) after a loadvm that moved nothing: want no jump", i, g, s.Missing)
				}
			}
		})
	}
}

// TestReviewIOMMUPlatformAddresses (review finding, NOT FIXED: this
// test fails): with VIRTIO_F_ACCESS_PLATFORM (QEMU's
// VIRTIO_F_IOMMU_PLATFORM) negotiated and a vIOMMU in the guest
// (intel-iommu/virtio-iommu, iommu_platform=on: vDPA and DPDK-in-guest
// setups), the ring addresses x-query-virtio-queue-status and the vhost
// variant answer are IOVAs, not guest-physical addresses: HMP gpa2hva
// of an IOVA is some other guest page (or none), and netctl counts what
// that page holds (a zero page passes the split-ring check) and shows
// its words as avail_idx/used_idx in stats --json. Nothing today looks
// at the feature. Until the IOVA is translated (or a vIOMMU is ruled out:
// SEV/TDX guests negotiate the feature without one), the rings source
// should say it cannot count them, as for packed rings.
func TestReviewIOMMUPlatformAddresses(t *testing.T) {
	f := newFakeVM(t, 1, false)
	f.mu.Lock()
	f.iommu = true
	f.mu.Unlock()
	tg := fakeTarget(f, policy.BackendUserspace)
	s := NewCollector(Options{}).Collect(context.Background(), []Target{tg})[0]
	if len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "IOMMU") {
		t.Errorf("ACCESS_PLATFORM negotiated: queues %+v (read at the addresses QEMU gave, maybe IOVAs), missing %v: want not counted, saying why", s.Queues, s.Missing)
	}
}
