package vhostrig

import "testing"

// recorder is a testing.TB that keeps what was reported.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func TestCheckWorkerCPU(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after map[int]float64
		fails         bool
	}{
		{"loaded pair rose most", map[int]float64{0: 1, 1: 1}, map[int]float64{0: 1.01, 1: 1.5}, false},
		{"loaded pair flat", map[int]float64{0: 1, 1: 1}, map[int]float64{0: 1, 1: 1}, true},
		{"idle pair rose as much", map[int]float64{0: 1, 1: 1}, map[int]float64{0: 1.5, 1: 1.5}, true},
		{"a pair gone", map[int]float64{0: 1, 1: 1}, map[int]float64{1: 1.5}, true},
		{"a pair new", map[int]float64{1: 1}, map[int]float64{0: 0, 1: 1.5}, true},
		{"one pair only", map[int]float64{1: 1}, map[int]float64{1: 1.5}, true},
	} {
		r := &recorder{TB: t}
		CheckWorkerCPU(r, c.name, 1, c.before, c.after)
		if (r.errors > 0) != c.fails {
			t.Errorf("%s: %d errors, want failure %v", c.name, r.errors, c.fails)
		}
	}
}
