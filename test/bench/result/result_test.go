package result

import "testing"

func TestFinishPairs(t *testing.T) {
	l := Finish(Line{A: NewSide("a", []float64{2, 4, 6}, 1, 3), B: NewSide("b", []float64{1, 4, 2}, 1, 3)}, "c", "")
	if l.A.Value != 4 || l.B.Value != 2 || l.Ratio != 2 || l.Rounds != 3 {
		t.Fatalf("medians %v %v ratio %v rounds %d", l.A.Value, l.B.Value, l.Ratio, l.Rounds)
	}
	if *l.RatioMin != 1 || *l.RatioMax != 3 || *l.RatioPairMedian != 2 {
		t.Fatalf("pair ratios %v..%v median %v, want 1..3 median 2", *l.RatioMin, *l.RatioMax, *l.RatioPairMedian)
	}
	if l.Schema != 2 || l.Kernel == "" || l.Time == "" {
		t.Fatalf("schema %d kernel %q time %q", l.Schema, l.Kernel, l.Time)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("Median = %v, want 2.5", m)
	}
}
