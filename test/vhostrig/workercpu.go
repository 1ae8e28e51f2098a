package vhostrig

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// CheckWorkerCPU is the stats and exporter VM tests' one assertion on
// the vhost workers' CPU time around a load: before and after are each
// queue pair's worker CPU seconds (read by the stats or the exporter)
// around frames sent on pair loaded (Send). Every pair must be in both;
// the loaded pair's worker must have risen, and by more than every other
// pair's, which carried nothing. It logs the rises after what (the
// kernel, the frames) and returns them by pair.
func CheckWorkerCPU(t testing.TB, what string, loaded int, before, after map[int]float64) map[int]float64 {
	t.Helper()
	pairs := make([]int, 0, len(before))
	for p := range before {
		pairs = append(pairs, p)
	}
	slices.Sort(pairs)
	rise := map[int]float64{}
	var parts []string
	for _, p := range pairs {
		a, ok := after[p]
		if !ok {
			t.Errorf("%s: pair %d's worker CPU is missing after the load (before: %v, after: %v)", what, p, before, after)
			continue
		}
		rise[p] = a - before[p]
		parts = append(parts, fmt.Sprintf("pair %d +%.2fs", p, rise[p]))
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: pair %d's worker CPU is missing before the load (before: %v, after: %v)", what, p, before, after)
		}
	}
	t.Logf("%s: worker CPU %s", what, strings.Join(parts, ", "))
	busy, ok := rise[loaded]
	if !ok {
		t.Errorf("%s: no worker CPU for the loaded pair %d", what, loaded)
		return rise
	}
	if busy <= 0 {
		t.Errorf("%s: the loaded pair %d's worker CPU did not rise (+%.2fs)", what, loaded, busy)
	}
	for _, p := range pairs {
		if p != loaded && rise[p] >= busy {
			t.Errorf("%s: pair %d's worker, which carried nothing, rose +%.2fs, not less than the loaded pair %d's +%.2fs", what, p, rise[p], loaded, busy)
		}
	}
	if len(pairs) < 2 {
		t.Errorf("%s: worker CPU of %d pair(s): the check needs an idle pair beside the loaded one", what, len(pairs))
	}
	return rise
}
