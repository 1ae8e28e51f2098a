// Command attach-bench measures issue 12's benchmarks for make bench and
// prints one schema-2 JSON line each (test/bench/result):
//
//   - latency: `netctl attach` (the binary, as users run it) against
//     attach-c, a minimal C program that issues the same QMP sequence
//     (test/bench/cattach), and netctl attach into a VM that has 64 NICs
//     attached against one that has 1. The VMs are paused q35 QEMUs with no
//     guest. On the host that is QEMU's userspace path (no vhost-net
//     here); in the 6.12 test VM the vhost-net path.
//   - datapath (in the 6.12 VM only): a nested Linux guest (test/l2's
//     kernel and modules, with the l2agent TCP tool) with two NICs: one
//     netctl attached on vhost-net, one QEMU set up itself (-netdev
//     tap,vhost=on). TCP streams both ways with the guest's offloads on and
//     off, and netctl's NIC against QEMU's.
//   - seeds (in the 6.12 VM only): the netmap and TX-thread seeds with two
//     nested guests, each with two netctl vhost-net NICs (--profile
//     throughput and --profile latency), taps on two bridges: guest to
//     guest TCP with offloads on against off, and 1-byte request/response
//     transactions on the latency NICs against the throughput NICs; each
//     with the CPU both guests' QEMUs (vhost workers included) spent per MB
//     or per 1000 transactions (seeds.go).
//
// Sides run interleaved round by round (A B A B, alternating which goes
// first) and each figure is the median of its rounds. Nothing here is a
// test: the figures are recorded, not asserted.
//
// It runs as root, in a network namespace of its own (made at start), so
// its taps and addresses stay there.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

var (
	netctlBin   = flag.String("netctl", "", "the netctl binary")
	attachC     = flag.String("attach-c", "", "the compiled test/bench/cattach/attach.c")
	commit      = flag.String("commit", "", "commit being measured")
	hostLoad    = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	only        = flag.String("only", "latency", "comma-separated: latency, datapath, seeds")
	root        = flag.String("root", "", "run QEMU chrooted here (/host in the test VM, where the host's / is)")
	rounds      = flag.Int("rounds", 7, "interleaved rounds per side of the data path (at least 5)")
	setupRounds = flag.Int("setup-rounds", 15, "interleaved rounds per side of the latency benchmarks (at least 5)")
	preload     = flag.Int("preload", 64, "NICs already attached on the crowded side of the scale benchmark")
	agent       = flag.String("agent", "", "the static l2agent binary (datapath)")
	vmlinuz     = flag.String("vmlinuz", "", "the kernel the nested guest boots (datapath; default: the test VM's own)")
	roundSecs   = flag.Float64("d", 5, "seconds per TCP stream or request/response round (datapath, seeds)")
	seedsAccel  = flag.String("seeds-accel", "auto", "the seeds' nested guests: kvm, tcg or auto (kvm when kvm_amd loads and they boot, else tcg)")
)

func init() {
	// Every child (QEMU, netctl, attach-c) is started from the main
	// goroutine, locked to the main thread, which main moves into a new
	// network namespace: the children inherit it.
	runtime.LockOSThread()
}

func main() {
	flag.Parse()
	if *rounds < 5 || *setupRounds < 5 || *rounds > 1000 || *setupRounds > 1000 {
		fatal("-rounds %d, -setup-rounds %d: every figure is the median of at least 5 rounds (5 to 1000)", *rounds, *setupRounds)
	}
	if *preload < 1 || *preload > 200 {
		fatal("-preload %d: use 1 to 200", *preload)
	}
	if a := *seedsAccel; a != "auto" && a != "kvm" && a != "tcg" {
		fatal("-seeds-accel %q: use kvm, tcg or auto", a)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		fatal("a network namespace of its own (unshare): %v (run as root)", err)
	}
	if err := linkUp("lo"); err != nil {
		fatal("%v", err)
	}
	for _, b := range strings.Split(*only, ",") {
		var err error
		switch b {
		case "latency":
			err = benchLatency()
		case "datapath":
			err = benchDatapath()
		case "seeds":
			err = benchSeeds()
		default:
			err = fmt.Errorf("-only %s: the benchmarks are latency, datapath and seeds", b)
		}
		if err != nil {
			fatal("%s: %v", b, err)
		}
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "attach-bench: "+format+"\n", args...)
	os.Exit(1)
}

// logf reports progress on stderr (stdout carries only the JSON lines).
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "attach-bench: "+format+"\n", args...)
}
