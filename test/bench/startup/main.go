// Command startup-bench measures what a netctl process costs before it does
// anything (issue 25): the package initialisation of the netctl make build
// ships (Go's GODEBUG=inittrace=1, summed over the packages) and the wall
// and CPU time of two calls that have nothing to do, `netctl version` and a
// libvirt hook call for a domain netctl does not manage, beside a static C
// program that reads its stdin and exits (the physical limit of a hook), and
// beside netctl-full (every command linked: what netctl was before the
// split). Rounds interleave the programs; JSON lines on stdout.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netctl/netctl/test/bench/result"
)

var (
	netctlBin = flag.String("netctl", "", "the split netctl (make build's bin/netctl)")
	fullBin   = flag.String("full", "", "netctl-full (make build's bin/netctl-full)")
	noopBin   = flag.String("noop", "", "the static C no-op (test/bench/cnoop/noop.c)")
	goNoopBin = flag.String("go-noop", "", "the Go no-op (test/bench/gonoop): the floor of any Go program on this machine")
	commit    = flag.String("commit", "", "commit being measured")
	hostLoad  = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	rounds    = flag.Int("rounds", 15, "interleaved rounds (at least 5); each round's figure is the median of -calls calls")
	calls     = flag.Int("calls", 21, "calls per program per round")
)

// hookXML is what libvirt gives the hook on stdin: a domain with an
// interface netctl was not asked to manage.
const hookXML = `<domain type='kvm'><name>bench-unmanaged</name><uuid>8d5c6f39-1b0e-4f4e-9a51-0c3b2d1e6f70</uuid>` +
	`<devices><interface type='network'><mac address='52:54:00:aa:bb:cc'/><source network='default'/><model type='virtio'/></interface></devices></domain>`

type sample struct{ wall, cpu, faults float64 } // ms, ms, page faults

// run starts argv once with stdin and env and returns its wall and CPU time.
func run(argv []string, stdin string, env []string) (sample, []byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return sample{}, nil, fmt.Errorf("%v: %w: %s", argv, err, stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{wall: float64(wall) / 1e6, cpu: float64(cpu) / 1e6, faults: float64(ru.Minflt + ru.Majflt)}, stderr.Bytes(), nil
}

// initTrace sums GODEBUG=inittrace=1's per-package clock times (ms) and
// returns the packages' count and the largest ones.
func initTrace(stderr []byte) (total float64, pkgs int, top map[string]float64) {
	top = map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			continue
		}
		total += ms
		pkgs++
		top[f[1]] = ms
	}
	return total, pkgs, top
}

func meets(b bool) *bool { return &b }

func median(xs []float64) float64 { return result.Median(xs) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "startup-bench:", err)
	os.Exit(1)
}

func main() {
	flag.Parse()
	if *netctlBin == "" || *fullBin == "" || *noopBin == "" || *goNoopBin == "" || *rounds < result.MinRounds || *calls < 1 {
		fail(fmt.Errorf("usage: startup-bench -netctl BIN -full BIN -noop BIN -go-noop BIN [-rounds N>=%d]", result.MinRounds))
	}
	tmp, err := os.MkdirTemp("", "startup-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	// The hook's run directory and config are the bench's own, passed as
	// the installed hook script passes them.
	env := os.Environ()
	traceEnv := append(append([]string{}, env...), "GODEBUG=inittrace=1")
	hook := []string{"hook", "qemu", "--run-dir", filepath.Join(tmp, "run"), "--config", filepath.Join(tmp, "hook.json"),
		"bench-unmanaged", "started", "begin", "-"}

	type prog struct {
		name  string
		argv  []string
		stdin string
	}
	progs := []prog{
		{"netctl_version", []string{*netctlBin, "version"}, ""},
		{"netctl_full_version", []string{*fullBin, "version"}, ""},
		{"netctl_hook_noop", append([]string{*netctlBin}, hook...), hookXML},
		{"netctl_full_hook_noop", append([]string{*fullBin}, hook...), hookXML},
		{"c_noop", []string{*noopBin}, hookXML},
		{"go_noop", []string{*goNoopBin}, hookXML},
	}
	wall := map[string][]float64{}
	cpu := map[string][]float64{}
	faults := map[string][]float64{}
	initMS := map[string][]float64{}
	pkgs := map[string]int{}
	tops := map[string]map[string][]float64{}
	for range *rounds {
		for _, p := range progs {
			var ws, cs, fs, is []float64
			for range *calls {
				s, _, err := run(p.argv, p.stdin, env)
				if err != nil {
					fail(err)
				}
				ws, cs, fs = append(ws, s.wall), append(cs, s.cpu), append(fs, s.faults)
				if p.name == "c_noop" {
					continue
				}
				_, stderr, err := run(p.argv, p.stdin, traceEnv)
				if err != nil {
					fail(err)
				}
				total, n, top := initTrace(stderr)
				if n == 0 {
					fail(fmt.Errorf("%v printed no inittrace lines", p.argv))
				}
				is = append(is, total)
				pkgs[p.name] = n
				if tops[p.name] == nil {
					tops[p.name] = map[string][]float64{}
				}
				for k, v := range top {
					tops[p.name][k] = append(tops[p.name][k], v)
				}
			}
			wall[p.name] = append(wall[p.name], median(ws))
			cpu[p.name] = append(cpu[p.name], median(cs))
			faults[p.name] = append(faults[p.name], median(fs))
			if len(is) > 0 {
				// The least of the round's calls: the inittrace figures are
				// clock times, which preemption on a loaded machine only
				// lengthens; the least is the closest to the CPU it takes.
				initMS[p.name] = append(initMS[p.name], slices.Min(is))
			}
		}
	}
	// The largest package inits of the split netctl's hook call.
	type pkgMS struct {
		Pkg string  `json:"pkg"`
		MS  float64 `json:"ms"`
	}
	topOf := func(name string) []pkgMS {
		var out []pkgMS
		for k, v := range tops[name] {
			out = append(out, pkgMS{k, result.Round(median(v), 3)})
		}
		for i := range out { // largest first, 12 of them
			for j := i + 1; j < len(out); j++ {
				if out[j].MS > out[i].MS {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out[:min(12, len(out))]
	}
	details := func(a, b string) map[string]any {
		return map[string]any{
			"calls_per_round": *calls, "packages_" + a: pkgs[a], "packages_" + b: pkgs[b],
			"timed": "rounds interleave every program; a round's wall and CPU figures are the medians of its calls, its init figure the least of its calls (inittrace reports clock time, which preemption only lengthens)",
		}
	}
	emit := func(l result.Line) { result.Print(result.Finish(l, *commit, *hostLoad)) }

	for _, c := range []struct{ split, full, what string }{
		{"netctl_version", "netctl_full_version", "netctl version"},
		{"netctl_hook_noop", "netctl_full_hook_noop", "netctl hook qemu DOMAIN started begin - (a domain netctl does not manage)"},
	} {
		d := details(c.split, c.full)
		d["largest_inits_ms"] = topOf(c.split)
		d["go_noop_init_ms"] = result.Round(median(initMS["go_noop"]), 3)
		d["go_noop_note"] = "go_noop: an empty Go program's init (the runtime's alone): what any Go program pays here"
		d["goal_of"] = "a: the split netctl's package initialisation, at most 1 ms; b: netctl-full's (every command linked)"
		a := result.NewSide(c.split, initMS[c.split], 1, 3)
		a.Note = c.what + ": the sum of GODEBUG=inittrace=1's per-package clock times"
		b := result.NewSide(c.full, initMS[c.full], 1, 3)
		b.Note = "the same call of netctl-full"
		emit(result.Line{Bench: "startup_init_" + strings.TrimPrefix(c.split, "netctl_"), Unit: "ms of package initialisation",
			A: a, B: b, Goal: "a at most 1 ms", Meets: meets(a.Value <= 1), Details: d})
	}
	for _, s := range []struct {
		name, unit string
		m          map[string][]float64
	}{{"wall", "ms per call, process start to exit", wall}, {"cpu", "ms of CPU per call (user+system, rusage)", cpu}} {
		a := result.NewSide("netctl_hook_noop", s.m["netctl_hook_noop"], 1, 3)
		a.Note = "netctl hook qemu DOMAIN started begin - for a domain netctl does not manage"
		b := result.NewSide("c_noop", s.m["c_noop"], 1, 3)
		b.Note = "test/bench/cnoop/noop.c, static: reads stdin, exits 0"
		d := details("netctl_hook_noop", "netctl_full_hook_noop")
		d["netctl_full_hook_noop_ms"] = result.Round(median(s.m["netctl_full_hook_noop"]), 3)
		d["netctl_version_ms"] = result.Round(median(s.m["netctl_version"]), 3)
		d["netctl_full_version_ms"] = result.Round(median(s.m["netctl_full_version"]), 3)
		d["go_noop_ms"] = result.Round(median(s.m["go_noop"]), 3)
		d["page_faults"] = map[string]float64{}
		for _, p := range progs {
			d["page_faults"].(map[string]float64)[p.name] = median(faults[p.name])
		}
		d["page_faults_note"] = "minor+major faults a call (rusage), medians: where a first touch of a page is dear (a VM whose host backs its memory lazily), they set the floor"
		emit(result.Line{Bench: "startup_hook_noop_" + s.name, Unit: s.unit, A: a, B: b,
			Goal: "reported (no goal): the cost of a hook call with nothing to do, beside a C no-op", Details: d})
	}
}
