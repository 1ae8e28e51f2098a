// Command statsvhost-bench measures, in the 6.1 VM (make bench
// BENCH=stats), what finding vhost-net workers costs a collection before
// Linux 6.4, where each worker is a kernel thread ("vhost-<owner tid>")
// that only a scan of /proc finds: one stats.Collector.Collect of 1, 16
// and 64 vhost-net "VMs", per VM. Each VM is a child process of this one
// (this binary, re-run with -child) that opened /dev/vhost-net and took
// ownership (VHOST_SET_OWNER), so the kernel made its worker; the targets
// name the children as QEMUs with one vhost-net queue pair and no
// monitor (the rings source then says why it has nothing; the vhost
// source is what is measured). Collect scans /proc once per collection
// (issue 20), so the per-VM cost must fall, not grow, with the VMs.
// Rounds run interleaved (1, 16, 64, rotating which goes first); each
// figure is the median of its rounds. Nothing is asserted but that every
// VM's worker is found.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/stats"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/vhostnet"
)

var (
	commit   = flag.String("commit", "", "commit being measured")
	hostLoad = flag.String("host-load", "", "the host's /proc/loadavg when make bench started")
	rounds   = flag.Int("rounds", 15, "interleaved rounds per scenario (at least 5)")
	child    = flag.Bool("child", false, "(internal) own a vhost-net device and wait for stdin to close")
)

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "statsvhost-bench: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	if *child {
		d, err := vhostnet.Open()
		if err != nil {
			fatal("child: %v", err)
		}
		if err := d.SetOwner(); err != nil {
			fatal("child: %v", err)
		}
		fmt.Println("owned")
		bufio.NewReader(os.Stdin).ReadString('\n') // until the parent goes
		return
	}
	if *rounds < result.MinRounds {
		fatal("-rounds %d: at least %d", *rounds, result.MinRounds)
	}
	sizes := []int{1, 16, 64}
	vms := map[int][]stats.Target{}
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			k.Process.Kill()
			k.Wait()
		}
	}()
	for _, n := range sizes {
		for i := 0; i < n; i++ {
			cmd := exec.Command("/proc/self/exe", "-child")
			in, err := cmd.StdinPipe()
			if err != nil {
				fatal("%v", err)
			}
			_ = in // closed when this process exits
			out, err := cmd.StdoutPipe()
			if err != nil {
				fatal("%v", err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				fatal("%v", err)
			}
			kids = append(kids, cmd)
			if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "owned\n" {
				fatal("child %d: %q %v", cmd.Process.Pid, l, err)
			}
			pid := cmd.Process.Pid
			start, err := qemuproc.StartTime(pid)
			if err != nil {
				fatal("%v", err)
			}
			vms[n] = append(vms[n], stats.Target{VM: "vm" + strconv.Itoa(pid), NIC: "net0", PID: pid, PIDStart: start,
				Backend: policy.BackendVhostNet, QueuePairs: 1})
		}
	}
	c := stats.NewCollector(stats.Options{})
	per := map[int][]float64{}
	for r := 0; r < *rounds; r++ {
		for j := range sizes {
			n := sizes[(j+r)%len(sizes)]
			t0 := time.Now()
			got := c.Collect(context.Background(), vms[n])
			d := time.Since(t0)
			for _, s := range got {
				if len(s.Workers) != 1 {
					fatal("%d VMs: %s: workers %+v (%v)", n, s.Target.VM, s.Workers, s.Missing)
				}
			}
			per[n] = append(per[n], float64(d.Microseconds())/1000/float64(n))
		}
	}
	for _, n := range sizes[1:] {
		l := result.Line{Bench: fmt.Sprintf("stats: one collection's vhost workers before Linux 6.4, per VM, %d vhost-net VMs vs 1", n),
			Unit: "ms per VM", A: result.NewSide(fmt.Sprintf("%d VMs", n), per[n], 1, 3), B: result.NewSide("1 VM", per[1], 1, 3),
			Rounds: *rounds, Goal: "per-VM cost at most that of 1 VM (one /proc scan per collection)"}
		l = result.Finish(l, *commit, *hostLoad)
		meets := l.A.Value <= l.B.Value*1.2
		l.Meets = &meets
		result.Print(l)
	}
}
