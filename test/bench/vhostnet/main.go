// Command vhostnet-bench measures netctl's vhost-net data path and setup in
// the test VM (make bench) and prints one JSON line per benchmark. Every
// ratio compares two runs made side by side in the same VM, interleaved
// round by round, so the machine's noise hits both sides alike.
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
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

var (
	setupC   = flag.String("c", "", "path of the compiled setup.c (the C side of the setup comparison)")
	commit   = flag.String("commit", "", "commit being measured")
	duration = flag.Duration("d", 1500*time.Millisecond, "duration of one throughput round")
	rounds   = flag.Int("rounds", 3, "interleaved rounds per side")
	rxBufF   = flag.Int("rxbuf", 4096, "RX buffer size with MRG_RXBUF")
	only     = flag.String("only", "", "comma-separated benchmarks to run (default all)")
)

// Side is one side of a comparison.
type Side struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Note  string  `json:"note,omitempty"`
}

// Line is one JSON line of output.
type Line struct {
	Bench   string   `json:"bench"`
	Unit    string   `json:"unit"`
	A       Side     `json:"a"`
	B       Side     `json:"b"`
	Ratio   float64  `json:"ratio"` // A / B
	Anchor  *float64 `json:"anchor,omitempty"`
	Goal    string   `json:"goal"`
	Meets   *bool    `json:"meets,omitempty"`
	Kernel  string   `json:"kernel"`
	Commit  string   `json:"commit,omitempty"`
	Time    string   `json:"time"`
	CPU     string   `json:"cpu"`
	Details any      `json:"details,omitempty"`
}

var kernel string

func emit(l Line) {
	l.Kernel, l.Commit, l.Time = kernel, *commit, time.Now().UTC().Format(time.RFC3339)
	l.CPU = "qemu -cpu max,erms=off (TCG unless KVM works)"
	if l.B.Value != 0 {
		l.Ratio = round(l.A.Value/l.B.Value, 3)
	}
	b, _ := json.Marshal(l)
	fmt.Println(string(b))
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

// interleave runs a and b alternately, rounds times each, and returns the
// median of each.
func interleave(a, b func() float64) (float64, float64) {
	var as, bs []float64
	for i := 0; i < *rounds; i++ {
		as = append(as, a())
		bs = append(bs, b())
	}
	return median(as), median(bs)
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

// runC runs the C setup program and returns its ns per setup.
func runC(iters int) float64 {
	if *setupC == "" {
		fatal("-c: the compiled setup.c is needed for the setup comparison")
	}
	out, err := exec.Command(*setupC, fmt.Sprint(iters)).Output()
	if err != nil {
		fatal("%s: %v", *setupC, err)
	}
	var r struct {
		NS float64 `json:"ns_per_setup"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		fatal("%s printed %q: %v", *setupC, out, err)
	}
	return r.NS
}
