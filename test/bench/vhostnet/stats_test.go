package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestInterleaveAlternates(t *testing.T) {
	var order strings.Builder
	n := 0
	as, bs := interleave(func() float64 { order.WriteByte('A'); n++; return float64(n) },
		func() float64 { order.WriteByte('B'); n++; return float64(n) })
	if got, want := order.String(), strings.Repeat("AB", *rounds); got != want || *rounds < 5 {
		t.Errorf("order %s, want %s (rounds %d, at least 5)", got, want, *rounds)
	}
	if !reflect.DeepEqual(as, []float64{1, 3, 5, 7, 9}) || !reflect.DeepEqual(bs, []float64{2, 4, 6, 8, 10}) {
		t.Errorf("rounds a %v b %v", as, bs)
	}
}

// The 1000-vs-10 rounds alternate: grow, measure, shrink, measure, ...,
// never all the 10-device rounds first.
func TestScaleRoundsInterleave(t *testing.T) {
	var log []string
	held := 0
	at1000, at10 := interleaveSized(5, func(n int) { held = n; log = append(log, fmt.Sprint("hold ", n)) },
		func() setupTimes {
			log = append(log, fmt.Sprint("measure at ", held))
			return setupTimes{float64(held), 0}
		})
	var want []string
	for i := 0; i < 5; i++ {
		want = append(want, "hold 1000", "measure at 1000", "hold 10", "measure at 10")
	}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("steps\n got %v\nwant %v", log, want)
	}
	if len(at1000) != 5 || len(at10) != 5 || at1000[0].setup != 1000 || at10[4].setup != 10 {
		t.Errorf("at1000 %v at10 %v", at1000, at10)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7},
	} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestSideMedianMinMax(t *testing.T) {
	s := side("x", []float64{3000, 1000, 5000, 2000, 90000}, 1e-3, 2)
	want := Side{Name: "x", Value: 3, Min: 1, Max: 90, Rounds: []float64{3, 1, 5, 2, 90}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("side %+v, want %+v", s, want)
	}
}

func TestLineCarriesSchemaRoundsAndRange(t *testing.T) {
	l := finish(Line{Bench: "b", A: side("a", []float64{10, 20, 30, 40, 50}, 1, 1), B: side("b", []float64{10, 10, 10, 10, 100}, 1, 1)})
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	a := m["a"].(map[string]any)
	for k, want := range map[string]any{"schema": 2.0, "rounds": 5.0, "ratio": 3.0, "ratio_min": 0.5, "ratio_max": 4.0, "ratio_pair_median": 2.0} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v in %s", k, m[k], want, b)
		}
	}
	if a["value"] != 30.0 || a["min"] != 10.0 || a["max"] != 50.0 {
		t.Errorf("side a %v", a)
	}
	// Rounds that did not run in pairs get no per-round ratio.
	l = finish(Line{A: side("a", []float64{1, 2, 3, 4, 5}, 1, 1), B: side("b", []float64{1, 2, 3, 4, 5}, 1, 1), Unpaired: true})
	if l.RatioMin != nil || l.RatioMax != nil {
		t.Errorf("unpaired rounds got a per-round ratio range %v..%v", *l.RatioMin, *l.RatioMax)
	}
}
