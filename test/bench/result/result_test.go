package result

import "testing"

func TestFinishPairs(t *testing.T) {
	l := Finish(Line{A: NewSide("a", []float64{2, 4, 6, 8, 1}, 1, 3), B: NewSide("b", []float64{1, 4, 2, 8, 1}, 1, 3)}, "c", "")
	if l.A.Value != 4 || l.B.Value != 2 || l.Ratio != 2 || l.Rounds != 5 {
		t.Fatalf("medians %v %v ratio %v rounds %d", l.A.Value, l.B.Value, l.Ratio, l.Rounds)
	}
	if *l.RatioMin != 1 || *l.RatioMax != 3 || *l.RatioPairMedian != 1 {
		t.Fatalf("pair ratios %v..%v median %v, want 1..3 median 1", *l.RatioMin, *l.RatioMax, *l.RatioPairMedian)
	}
	if l.Schema != 2 || l.Kernel == "" || l.Time == "" {
		t.Fatalf("schema %d kernel %q time %q", l.Schema, l.Kernel, l.Time)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("Median = %v, want 2.5", m)
	}
}

// TestFinishRefusesFewRounds: a figure of fewer than 5 rounds (the stats
// bench's --watch CPU was one run per side) does not become a line.
func TestFinishRefusesFewRounds(t *testing.T) {
	for _, n := range []int{1, 4} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = 1
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a side of %d round(s) was accepted", n)
				}
			}()
			Finish(Line{Bench: "b", A: NewSide("a", xs, 1, 1), B: NewSide("b", []float64{1, 1, 1, 1, 1}, 1, 1)}, "c", "")
		}()
	}
}

func TestInterleaveAlternates(t *testing.T) {
	var order []byte
	n := 0
	as, bs := Interleave(3, func() float64 { order = append(order, 'A'); n++; return float64(n) },
		func() float64 { order = append(order, 'B'); n++; return float64(n) })
	if string(order) != "ABABAB" {
		t.Errorf("order %s, want ABABAB", order)
	}
	if len(as) != 3 || len(bs) != 3 || as[0] != 1 || bs[0] != 2 || as[2] != 5 || bs[2] != 6 {
		t.Errorf("rounds a %v b %v, want [1 3 5] [2 4 6]", as, bs)
	}
}
