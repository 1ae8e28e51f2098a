// Package result writes make bench's schema-2 JSON lines (the format of
// test/bench/vhostnet/main.go: each side's median of its interleaved
// rounds with min, max and every round; the ratio of the medians and the
// range of the per-round ratios) for the benchmarks that are not in
// vhostnet-bench: attach-bench's attach latency and nested-guest data path.
package result

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// Schema is the version of the lines' meaning; 2 as in vhostnet-bench.
const Schema = 2

// MinRounds is the fewest rounds a side's figure may be the median of
// (issue 10 §4: every figure is the median of at least 5 rounds, with min
// and max). Finish panics on fewer: a figure of one or two runs is noise.
const MinRounds = 5

// Side is one side of a comparison.
type Side struct {
	Name   string    `json:"name"`
	Value  float64   `json:"value"` // median of Rounds
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"` // in the order they ran
	Note   string    `json:"note,omitempty"`
}

// NewSide summarises the rounds xs, scaled by scale and rounded to digits.
// It panics on no rounds: a benchmark that measured nothing is a bug.
func NewSide(name string, xs []float64, scale float64, digits int) Side {
	if len(xs) == 0 {
		panic("result: " + name + ": no rounds measured")
	}
	s := Side{Name: name, Value: Round(Median(xs)*scale, digits), Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		v := Round(x*scale, digits)
		s.Rounds = append(s.Rounds, v)
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	return s
}

// Line is one JSON line, as vhostnet-bench writes it.
type Line struct {
	Schema          int      `json:"schema"`
	Bench           string   `json:"bench"`
	Unit            string   `json:"unit"`
	A               Side     `json:"a"`
	B               Side     `json:"b"`
	Ratio           float64  `json:"ratio"` // median(A) / median(B)
	RatioMin        *float64 `json:"ratio_min,omitempty"`
	RatioMax        *float64 `json:"ratio_max,omitempty"`
	RatioPairMedian *float64 `json:"ratio_pair_median,omitempty"`
	Rounds          int      `json:"rounds"`
	Anchor          *float64 `json:"anchor,omitempty"`
	Goal            string   `json:"goal"`
	Meets           *bool    `json:"meets,omitempty"`
	Kernel          string   `json:"kernel"`
	Commit          string   `json:"commit,omitempty"`
	Time            string   `json:"time"`
	CPU             string   `json:"cpu"`
	HostLoad        string   `json:"host_load,omitempty"`
	Details         any      `json:"details,omitempty"`
	// Unpaired: A's and B's rounds did not run in pairs, so Finish gives
	// no per-round ratios.
	Unpaired bool `json:"-"`
}

// Finish fills in the schema, kernel, time, CPU description, the ratio of
// the medians and the per-pair ratios (A's and B's rounds ran in pairs).
// It panics when a side has fewer than MinRounds rounds.
func Finish(l Line, commit, hostLoad string) Line {
	for _, s := range []Side{l.A, l.B} {
		if len(s.Rounds) < MinRounds {
			panic(fmt.Sprintf("result: %s: %s: %d round(s); every figure is the median of at least %d", l.Bench, s.Name, len(s.Rounds), MinRounds))
		}
	}
	l.Schema = Schema
	var uts unix.Utsname
	unix.Uname(&uts)
	l.Kernel = unix.ByteSliceToString(uts.Release[:])
	l.Commit, l.HostLoad = commit, hostLoad
	l.Time = time.Now().UTC().Format(time.RFC3339)
	l.CPU = cpuDesc()
	if l.B.Value != 0 {
		l.Ratio = Round(l.A.Value/l.B.Value, 3)
	}
	l.Rounds = min(len(l.A.Rounds), len(l.B.Rounds))
	if !l.Unpaired && len(l.A.Rounds) == len(l.B.Rounds) {
		var rs []float64
		for i, a := range l.A.Rounds {
			if b := l.B.Rounds[i]; b != 0 {
				rs = append(rs, a/b)
			}
		}
		if len(rs) > 0 {
			l.RatioMin, l.RatioMax = F(Round(slices.Min(rs), 3)), F(Round(slices.Max(rs), 3))
			l.RatioPairMedian = F(Round(Median(rs), 3))
		}
	}
	return l
}

// Print writes l as one JSON line on stdout.
func Print(l Line) {
	b, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

// cpuDesc says how the machine runs: the harness's accelerator and CPU in
// the VM, "host" outside it.
func cpuDesc() string {
	accel, cpu, smp := os.Getenv("NETCTL_VM_ACCEL"), os.Getenv("NETCTL_VM_CPU"), os.Getenv("NETCTL_VM_SMP")
	if accel == "" {
		return fmt.Sprintf("host (not in the test VM), %d CPUs", numCPU())
	}
	return fmt.Sprintf("qemu %s -cpu %s, %s vCPUs", accel, cpu, smp)
}

func numCPU() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	return set.Count()
}

// Round rounds v to digits decimal places.
func Round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// Interleave runs a and b alternately (A B A B ...), rounds times each,
// and returns each one's rounds: a drift in the machine's load over the
// run falls on both sides alike.
func Interleave(rounds int, a, b func() float64) (as, bs []float64) {
	for i := 0; i < rounds; i++ {
		as = append(as, a())
		bs = append(bs, b())
	}
	return as, bs
}

// Median of xs (the mean of the middle two for an even count).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// F and T make the optional fields.
func F(v float64) *float64 { return &v }
func T(v bool) *bool       { return &v }
