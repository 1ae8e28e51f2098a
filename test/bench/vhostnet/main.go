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
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/netctl/netctl/test/bench/result"
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

// Side and Line are the JSON lines' (schema 2, package result, which
// attach-bench writes too).
type (
	Side = result.Side
	Line = result.Line
)

// side summarises the rounds xs, scaled by scale and rounded to digits.
func side(name string, xs []float64, scale float64, digits int) Side {
	if len(xs) == 0 {
		fatal("%s: no rounds measured", name)
	}
	return result.NewSide(name, xs, scale, digits)
}

func emit(l Line) { result.Print(finish(l)) }

// finish fills in what every line carries (result.Finish).
func finish(l Line) Line { return result.Finish(l, *commit, *hostLoad) }

var (
	round  = result.Round
	median = result.Median
	f      = result.F
	t      = result.T
)

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

// interleave runs a and b alternately, -rounds times each (result.Interleave).
func interleave(a, b func() float64) (as, bs []float64) { return result.Interleave(*rounds, a, b) }

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
	if *vdpaChild != "" {
		vdpaBringUpChild(*vdpaChild, *vdpaChildIters)
		return
	}
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
