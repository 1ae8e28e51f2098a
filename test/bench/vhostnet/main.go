// Command vhostnet-bench measures netctl's vhost-net data path and setup in
// the test VM (make bench) and prints one JSON line per benchmark. Every
// ratio compares two runs made side by side in the same VM, interleaved
// round by round (A B A B ...), so the machine's noise hits both sides
// alike. Every figure is the median of -rounds rounds (at least 5), with
// the minimum, the maximum and each round's value beside it.
//
// The JSON lines stay comparable across commits: a field or a bench name
// keeps its name only while its meaning stays the same. Schema 2 (this
// one) added "schema", "rounds", "ratio_min", "ratio_max",
// "ratio_pair_median", "host_load" and each side's "min", "max" and
// "rounds"; "value" is the median of the rounds (schema 1 lines, which
// have no "schema" field, took the median of 3 rounds, and the memcpy side
// took the best round); "cpu" names the accelerator the harness used
// instead of "TCG unless KVM works". New lines: setup alone and teardown
// alone beside each setup-and-teardown line
// (vhostnet_queue_pair_setup_only_netctl_vs_c,
// vhostnet_queue_pair_teardown_netctl_vs_c,
// vhostnet_setup_only_1000_open_vs_10, vhostnet_teardown_1000_open_vs_10).
// backends_tso_tx_tap_macvtap_packet (a tap watched directly against the
// others over a veth) is replaced by backends_tso_tx_over_veth_tap_vs_macvtap
// and backends_tso_tx_over_veth_tap_vs_packet_socket. The raw TX and RX
// lines give CPU per MB per round under details.cpu_ms_per_MB.<side>
// (schema 1: details.cpu_ms_per_MB_<side>, one figure over all rounds).
//
// It runs as root inside the throwaway VM, in the VM's own network
// namespace: all traffic stays inside the VM.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

var (
	setupC   = flag.String("c", "", "path of the compiled setup.c (the C side of the setup comparison)")
	commit   = flag.String("commit", "", "commit being measured")
	duration = flag.Duration("d", 1500*time.Millisecond, "duration of one throughput round")
	rounds   = flag.Int("rounds", 5, "interleaved rounds per side (at least 5)")
	// The setup benchmarks take many short rounds: on a shared machine a
	// burst of load lasts seconds, and short rounds let it hit both sides
	// of a pair alike.
	setupRounds = flag.Int("setup-rounds", 15, "interleaved rounds per side of the setup benchmarks (at least 5)")
	rxBufF      = flag.Int("rxbuf", 4096, "RX buffer size with MRG_RXBUF")
	only        = flag.String("only", "", "comma-separated benchmarks to run (default all)")
	hostLoad    = flag.String("host-load", "", "the host's /proc/loadavg, recorded in every line (make bench passes it)")
)

// schema is the version of the JSON lines' meaning (see the package doc).
const schema = 2

// Side is one side of a comparison: the median of its rounds, with their
// minimum and maximum.
type Side struct {
	Name   string    `json:"name"`
	Value  float64   `json:"value"` // median of Rounds
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"` // in the order they ran
	Note   string    `json:"note,omitempty"`
}

// side summarises the rounds xs, scaled by scale and rounded to digits.
func side(name string, xs []float64, scale float64, digits int) Side {
	if len(xs) == 0 {
		fatal("%s: no rounds measured", name)
	}
	s := Side{Name: name, Value: round(median(xs)*scale, digits), Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		v := round(x*scale, digits)
		s.Rounds = append(s.Rounds, v)
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	return s
}

// Line is one JSON line of output.
type Line struct {
	Schema   int      `json:"schema"`
	Bench    string   `json:"bench"`
	Unit     string   `json:"unit"`
	A        Side     `json:"a"`
	B        Side     `json:"b"`
	Ratio    float64  `json:"ratio"`               // median(A) / median(B)
	RatioMin *float64 `json:"ratio_min,omitempty"` // the lowest A/B of one round's pair
	RatioMax *float64 `json:"ratio_max,omitempty"` // the highest
	// RatioPairMedian is the median of the per-pair ratios: steadier than
	// Ratio when the machine's load drifts between rounds.
	RatioPairMedian *float64 `json:"ratio_pair_median,omitempty"`
	Rounds          int      `json:"rounds"` // rounds per side
	Anchor          *float64 `json:"anchor,omitempty"`
	Goal            string   `json:"goal"`
	Meets           *bool    `json:"meets,omitempty"`
	Kernel          string   `json:"kernel"`
	Commit          string   `json:"commit,omitempty"`
	Time            string   `json:"time"`
	CPU             string   `json:"cpu"`
	HostLoad        string   `json:"host_load,omitempty"` // the host's /proc/loadavg when make bench started
	Details         any      `json:"details,omitempty"`
	// unpaired: A's and B's rounds did not run in pairs, so no ratio per
	// round.
	unpaired bool
}

var kernel string

func emit(l Line) {
	b, _ := json.Marshal(finish(l))
	fmt.Println(string(b))
}

// finish fills in what every line carries: schema, kernel, commit, time,
// the ratio of the medians and the range of the per-round ratios.
func finish(l Line) Line {
	l.Schema = schema
	l.Kernel, l.Commit, l.Time = kernel, *commit, time.Now().UTC().Format(time.RFC3339)
	l.CPU = cpuDesc()
	l.HostLoad = *hostLoad
	if l.B.Value != 0 {
		l.Ratio = round(l.A.Value/l.B.Value, 3)
	}
	l.Rounds = min(len(l.A.Rounds), len(l.B.Rounds))
	// Rounds ran in pairs (A then B), so each pair's ratio shows how far
	// one round's noise moves the figure.
	if !l.unpaired && len(l.A.Rounds) == len(l.B.Rounds) {
		var rs []float64
		for i, a := range l.A.Rounds {
			if b := l.B.Rounds[i]; b != 0 {
				rs = append(rs, a/b)
			}
		}
		if len(rs) > 0 {
			l.RatioMin, l.RatioMax = f(round(slices.Min(rs), 3)), f(round(slices.Max(rs), 3))
			l.RatioPairMedian = f(round(median(rs), 3))
		}
	}
	return l
}

// cpuDesc says how the VM runs, from what the harness exports:
// "qemu tcg -cpu max,erms=off, 2 vCPUs" (schema 1 said "qemu -cpu
// max,erms=off (TCG unless KVM works)" whatever the accelerator).
func cpuDesc() string {
	accel, cpu, smp := os.Getenv("NETCTL_VM_ACCEL"), os.Getenv("NETCTL_VM_CPU"), os.Getenv("NETCTL_VM_SMP")
	if accel == "" {
		return "unknown: not run by netctl-vm"
	}
	return fmt.Sprintf("qemu %s -cpu %s, %s vCPUs", accel, cpu, smp)
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// cpuBusy returns the busy (non-idle, non-iowait) time of all CPUs from
// /proc/stat, in clock ticks (USER_HZ, 100 per second).
func cpuBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line := strings.SplitN(string(b), "\n", 2)[0]
	var total float64
	for i, fld := range strings.Fields(line)[1:] {
		var v float64
		fmt.Sscan(fld, &v)
		if i != 3 && i != 4 { // idle, iowait
			total += v
		}
	}
	return total
}

// interleave runs a and b alternately (A B A B ...), rounds times each,
// and returns each one's rounds.
func interleave(a, b func() float64) (as, bs []float64) {
	for i := 0; i < *rounds; i++ {
		as = append(as, a())
		bs = append(bs, b())
	}
	return as, bs
}

func f(v float64) *float64 { return &v }
func t(v bool) *bool       { return &v }

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vhostnet-bench: "+format+"\n", args...)
	os.Exit(1)
}

func want(name string) bool {
	if *only == "" {
		return true
	}
	for _, n := range strings.Split(*only, ",") {
		if n == name {
			return true
		}
	}
	return false
}

func main() {
	flag.Parse()
	if *rounds < 5 || *rounds > 1000 || *setupRounds < 5 || *setupRounds > 1000 {
		fatal("-rounds %d, -setup-rounds %d: every figure is the median of at least 5 rounds (5 to 1000)", *rounds, *setupRounds)
	}
	rxBuf = *rxBufF
	var uts unix.Utsname
	unix.Uname(&uts)
	kernel = unix.ByteSliceToString(uts.Release[:])
	if want("tx") {
		benchTX()
	}
	if want("rx") {
		benchRX()
	}
	if want("rxtcp") {
		benchRXTCP()
	}
	if want("txtcp") {
		benchTXTCP()
	}
	if want("uso") {
		benchUSO()
	}
	if want("backends") {
		benchBackends()
	}
	if want("zerocopy") {
		benchZeroCopy()
	}
	if want("setup") {
		benchSetup()
	}
	if want("iotlb") {
		benchIOTLB()
	}
	if want("vdpasetup") {
		benchVDPASetup()
	}
	if want("scale") {
		benchScale()
	}
}

// runC runs the C setup program and returns its ns per setup and per
// teardown (setup.c times the two phases apart, as nsPerSetup does).
func runC(iters int) (setup, teardown float64) {
	if *setupC == "" {
		fatal("-c: the compiled setup.c is needed for the setup comparison")
	}
	out, err := exec.Command(*setupC, fmt.Sprint(iters)).Output()
	if err != nil {
		fatal("%s: %v", *setupC, err)
	}
	var r struct {
		Setup    *float64 `json:"ns_setup"`
		Teardown *float64 `json:"ns_teardown"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Setup == nil || r.Teardown == nil {
		fatal("%s printed %q, want ns_setup and ns_teardown: %v", *setupC, out, err)
	}
	return *r.Setup, *r.Teardown
}
