package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	vnl "github.com/vishvananda/netlink"

	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/bench/l2guest"
	"github.com/netctl/netctl/test/bench/result"
	"github.com/netctl/netctl/test/l2"
)

// The seeds benchmark (-only seeds): the two seeds that lacked a
// measurement on the product's data path, with two nested guests A and B
// in the 6.12 VM. Each guest has two NICs netctl attached on vhost-net
// while it was paused: ..:01 with --profile throughput, its tap on bridge
// sbr0 (10.93.0.0/24), and ..:02 with --profile latency (vhost
// busy-polling), its tap on bridge sbr1 (10.94.0.0/24). The bench's own
// addresses on the bridges reach the guests' agents.
//
//   - netmap seed: one TCP stream guest A -> guest B per round over the
//     throughput NICs, the guests' offloads on against off (both guests).
//   - TX-thread seed: 1-byte request/response transactions A -> B on one
//     connection, over the latency NICs against the throughput NICs.
//
// Every round also gives the CPU time both guests' QEMU processes spent
// in its window (/proc/PID/stat utime+stime: all threads of the thread
// group, vCPU, I/O and, on Linux 6.4 and later, the vhost workers, which
// are vhost_task threads in QEMU's thread group), per MB moved or per 1000
// transactions.
type seedGuest struct {
	*nestedGuest
	name       string
	mac1, mac2 string // throughput NIC, latency NIC
	ip1, ip2   string
	taps       [2]string
	busyPoll   [2]uint32 // busy_poll_us of each NIC's netctl record
}

const (
	seedBr1 = "sbr0" // throughput NICs
	seedBr2 = "sbr1" // latency NICs
)

// Seed figures (bench/README: the seeds' own measurements, bare metal).
const (
	netmapSeedOff, netmapSeedOn = 5.0, 21.4 // Gbit/s, guest to guest, offloads off -> on
	rrSeedThroughput, rrSeedLat = 2029.0, 3928.0
)

func benchSeeds() error {
	kernel, err := nestedKernel("seeds")
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := l2.Chroot(); err != nil {
		return err
	}
	for br, cidr := range map[string]string{seedBr1: "10.93.0.1/24", seedBr2: "10.94.0.1/24"} {
		b := &vnl.Bridge{LinkAttrs: vnl.LinkAttrs{Name: br}}
		if err := vnl.LinkAdd(b); err != nil {
			return fmt.Errorf("bridge %s: %w", br, err)
		}
		defer vnl.LinkDel(b)
		if err := l2guest.AddrUp(br, cidr); err != nil {
			return err
		}
	}
	runDir, err := os.MkdirTemp("", "attach-bench-seeds")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)

	details := map[string]any{}
	accel := *seedsAccel
	if accel == "auto" {
		accel = "kvm"
		if err := l2.LoadKVM(); err != nil {
			accel = "tcg"
			details["kvm_unavailable"] = err.Error()
		}
	} else if accel == "tcg" {
		details["kvm_unavailable"] = "not tried: -seeds-accel tcg (make bench: the run with nested KVM guests failed)"
	} else if accel == "kvm" {
		if err := l2.LoadKVM(); err != nil {
			return err
		}
	}
	gs, booted, err := bootSeedGuests(ctx, kernel, runDir, accel)
	if err != nil && *seedsAccel == "auto" && accel == "kvm" {
		logf("seeds: nested KVM guests did not come up (%v); booting them under TCG", err)
		details["kvm_unavailable"] = err.Error()
		accel = "tcg"
		gs, booted, err = bootSeedGuests(ctx, kernel, runDir, accel)
	}
	if err != nil {
		return err
	}
	for _, g := range gs {
		defer g.Close()
	}
	a, b := gs[0], gs[1]
	logf("seeds: two nested guests (%s) up in %v", accel, booted.Round(time.Second))

	// Busy-polling in effect: netctl's records (checked in netctlAttach:
	// busy_poll_us on the latency NICs only, which attach passed to
	// netdev_add as poll-us). The vhost device itself cannot be asked from
	// here: vhost-net answers VHOST_GET_VRING_BUSYLOOP_TIMEOUT only to its
	// owner's mm (vhost_dev_check_owner: EPERM for any other process, even
	// with QEMU's fd copied by pidfd_getfd).
	details["busy_poll"] = fmt.Sprintf("busy_poll_us in netctl's records: guest A throughput/latency NIC %d/%d, guest B %d/%d (passed to netdev_add as poll-us; QEMU sets it on both vhost rings with VHOST_SET_VRING_BUSYLOOP_TIMEOUT; vhost-net refuses to read it back to any process but QEMU)",
		a.busyPoll[0], a.busyPoll[1], b.busyPoll[0], b.busyPoll[1])
	details["accel"] = accel
	details["guests"] = fmt.Sprintf("two nested Linux guests (the test VM's 6.12 kernel, busybox initramfs), QEMU -accel %s -cpu max,erms=off, 1 vCPU, 512 MiB, pc each; both up %.0f s after start", accel, booted.Seconds())
	details["nics"] = fmt.Sprintf("per guest, two NICs attached by netctl attach --backend vhost-net into the paused guest: ..:01 --profile throughput (taps %s, %s on bridge %s), ..:02 --profile latency (taps %s, %s on bridge %s); busy_poll_us in the records: A %v, B %v",
		a.taps[0], b.taps[0], seedBr1, a.taps[1], b.taps[1], seedBr2, a.busyPoll, b.busyPoll)
	details["cpu_accounting"] = "CPU = utime+stime of both guests' QEMU processes (/proc/PID/stat, the whole thread group: vCPU threads, QEMU's I/O thread and, on this 6.12 kernel, the vhost-net workers, which are vhost_task threads in QEMU's thread group; the L1 bridge's forwarding runs in those workers' context) over the round's window (from the request to the agent to its answer), in 10 ms ticks; divided by the bytes guest B received (MB = 10^6 bytes) or by the transactions done. Caveat: this is L1's accounting, and L1 runs under TCG with no steal time: when this host's scheduler takes an L1 vCPU away, the L1 task on it is charged that time, so on a loaded host the CPU per MB rises too (trial runs: 27 to 870 ms/MB with offloads on across runs); within a run the interleaved rounds share the load, and the per-round ratios are what compare"
	details["tcg"] = tcgNote(accel)

	// Under nested KVM an idle guest vCPU that halts is polled by L1's KVM
	// for up to halt_poll_ns before it sleeps: CPU spent waiting that
	// would land in the CPU per MB or per transaction as much as in the
	// work. Off for the bench (restored after), so those lines count work
	// (and vhost busy-polling, which the latency side is about).
	if accel == "kvm" {
		const hp = "/sys/module/kvm/parameters/halt_poll_ns"
		if old, err := os.ReadFile(hp); err == nil {
			if err := os.WriteFile(hp, []byte("0"), 0o644); err == nil {
				defer os.WriteFile(hp, old, 0o644)
				details["kvm_halt_poll_ns"] = "0 during the bench (was " + strings.TrimSpace(string(old)) + "): idle nested vCPUs sleep at once instead of L1's KVM polling them, so the CPU lines count work, not waiting"
			}
		}
	}

	d := time.Duration(*roundSecs * float64(time.Second))
	ms := d.Milliseconds()
	// One warm-up of each kind first, not counted: the first rounds after
	// boot ran several times slower in trial runs (both sides alike).
	warm := map[string]string{}
	for _, c := range [][2]string{{a.ip1, "sendto " + b.ip1}, {a.ip2, "rr " + b.ip2}, {a.ip1, "rr " + b.ip1}} {
		line, err := l2guest.AgentCmdTimeout(c[0], fmt.Sprintf("%s %d", c[1], ms), d+60*time.Second)
		if err != nil {
			return fmt.Errorf("warm-up %s: %w", c[1], err)
		}
		warm[c[1]] = line
	}
	details["warm_up_not_counted"] = warm
	pids := []int{a.cmd.Process.Pid, b.cmd.Process.Pid}
	// window runs f and returns the CPU ms both QEMUs spent meanwhile.
	window := func(f func() error) (float64, error) {
		c0, err := cpuMS(pids)
		if err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
		c1, err := cpuMS(pids)
		return c1 - c0, err
	}

	// Netmap seed: guest A -> guest B over the throughput NICs.
	offState := ""
	offloads := func(state string) error {
		if state == offState {
			return nil
		}
		for _, g := range gs {
			r, err := l2guest.AgentCmd(g.ip1, "offload "+g.mac1+" "+state)
			if err != nil {
				return fmt.Errorf("guest %s: offloads %s: %w", g.name, state, err)
			}
			details["guest_"+g.name+"_offloads_"+state] = r
		}
		offState = state
		return nil
	}
	mbits, cpuPerMB := map[string][]float64{}, map[string][]float64{}
	for r := 0; r < *rounds; r++ {
		seq := []string{"on", "off"}
		if r%2 == 1 {
			seq = []string{"off", "on"}
		}
		for _, s := range seq {
			if err := offloads(s); err != nil {
				return err
			}
			var n, ns int64
			cpu, err := window(func() error {
				line, err := l2guest.AgentCmdTimeout(a.ip1, fmt.Sprintf("sendto %s %d", b.ip1, ms), d+60*time.Second)
				if err != nil {
					return err
				}
				n, ns, err = l2guest.ParseRecvReply(line)
				return err
			})
			if err != nil {
				return fmt.Errorf("round %d, guest A -> B, offloads %s: %w", r, s, err)
			}
			mbits[s] = append(mbits[s], float64(n)*8/(float64(ns)/1e9)/1e6)
			cpuPerMB[s] = append(cpuPerMB[s], cpu/(float64(n)/1e6))
		}
		logf("seeds: round %d: Mbit/s on %.0f off %.0f, ms CPU/MB on %.2f off %.2f", r, mbits["on"][r], mbits["off"][r], cpuPerMB["on"][r], cpuPerMB["off"][r])
	}
	if err := offloads("on"); err != nil {
		return err
	}

	// TX-thread seed: 1-byte transactions A -> B, latency NICs against
	// throughput NICs.
	tps, cpuPerK := map[string][]float64{}, map[string][]float64{}
	peer := map[string][2]string{"latency": {a.ip2, b.ip2}, "throughput": {a.ip1, b.ip1}}
	for r := 0; r < *rounds; r++ {
		seq := []string{"latency", "throughput"}
		if r%2 == 1 {
			seq = []string{"throughput", "latency"}
		}
		for _, s := range seq {
			var n, ns int64
			cpu, err := window(func() error {
				line, err := l2guest.AgentCmdTimeout(peer[s][0], fmt.Sprintf("rr %s %d", peer[s][1], ms), d+60*time.Second)
				if err != nil {
					return err
				}
				n, ns, err = l2guest.ParseRecvReply(line)
				return err
			})
			if err != nil {
				return fmt.Errorf("round %d, request/response on the %s NICs: %w", r, s, err)
			}
			tps[s] = append(tps[s], float64(n)/(float64(ns)/1e9))
			cpuPerK[s] = append(cpuPerK[s], cpu/(float64(n)/1000))
		}
		logf("seeds: round %d: transactions/s latency %.0f throughput %.0f", r, tps["latency"][r], tps["throughput"][r])
	}

	emit := func(bench, unit string, a, b result.Side, anchor *float64, goal string, meets *bool, extra map[string]any) {
		l := result.Finish(result.Line{Bench: bench, Unit: unit, A: a, B: b, Goal: goal}, *commit, *hostLoad)
		l.Anchor = anchor
		if meets != nil {
			l.Meets = result.T(*meets)
		}
		m := map[string]any{}
		for k, v := range details {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		l.Details = m
		result.Print(l)
	}
	netmap := netmapSeedOn / netmapSeedOff
	streamDesc := fmt.Sprintf("one TCP connection guest A -> guest B per round, %.1f s, over the throughput-profile NICs and bridge %s; offloads on/off on both guests (ethtool features: tx-checksum-ip-generic, sg, tso, tso6, tso-ecn, gso, gro, rx-gro-hw); rounds interleaved, alternating which goes first; throughput as guest B counted it", *roundSecs, seedBr1)
	on := result.NewSide("offloads_on", mbits["on"], 1, 1)
	off := result.NewSide("offloads_off", mbits["off"], 1, 1)
	emit("seed_netmap_guest_to_guest_tcp_offloads_on_vs_off", "Mbit/s, TCP stream guest to guest", on, off, result.F(result.Round(netmap, 3)),
		fmt.Sprintf("the seed's %.1f -> %.1f Gbit/s (%.2fx) reproduced: ratio at least %.2f", netmapSeedOff, netmapSeedOn, netmap, netmap),
		boolp(ratio(on, off) >= netmap), map[string]any{"stream": streamDesc, "seed": "netmap seed: guest to guest TCP on one host, offloads off 5.0 -> on 21.4 Gbit/s (4.3x), bare metal"})
	cOn := result.NewSide("offloads_on", cpuPerMB["on"], 1, 3)
	cOff := result.NewSide("offloads_off", cpuPerMB["off"], 1, 3)
	emit("seed_netmap_guest_to_guest_tcp_cpu_per_mb_offloads_on_vs_off", "ms of CPU per MB", cOn, cOff, result.F(result.Round(1/netmap, 3)),
		fmt.Sprintf("offloads cut the CPU per MB at least as much as the seed's throughput gain: ratio at most %.3f (1/%.2f)", 1/netmap, netmap),
		boolp(ratio(cOn, cOff) <= 1/netmap), map[string]any{"stream": streamDesc,
			"why": "throughput under nested emulation on a shared 2-core machine mostly measures how much CPU the guests got; the CPU spent per MB moved does not depend on how much CPU L1 gave the guests (it still rises with the time this host takes from L1's vCPUs, see cpu_accounting)"})
	rrSeed := rrSeedLat / rrSeedThroughput
	rrDesc := fmt.Sprintf("1-byte request, 1-byte response, one TCP connection (TCP_NODELAY) guest A -> guest B, %.1f s per round: l2agent rr/rrserve; latency side over the --profile latency NICs (bridge %s), throughput side over the --profile throughput NICs (bridge %s), both guests' NICs of that profile; rounds interleaved, alternating which goes first", *roundSecs, seedBr2, seedBr1)
	lat := result.NewSide("latency_profile_busy_poll", tps["latency"], 1, 0)
	thr := result.NewSide("throughput_profile", tps["throughput"], 1, 0)
	emit("seed_txthread_rr_latency_vs_throughput_profile", "transactions/s, 1-byte TCP request/response", lat, thr, result.F(result.Round(rrSeed, 3)),
		fmt.Sprintf("the seed's %.0f -> %.0f transactions/s (%.2fx) reproduced: ratio at least %.2f", rrSeedThroughput, rrSeedLat, rrSeed, rrSeed),
		boolp(ratio(lat, thr) >= rrSeed), map[string]any{"rr": rrDesc, "transaction_time": txTimeNote(thr.Value), "seed": "TX-thread seed: TCP_RR of a real guest, 2029 -> 3928 transactions/s (1.93x) with vhost busy-polling, bare metal"})
	kLat := result.NewSide("latency_profile_busy_poll", cpuPerK["latency"], 1, 1)
	kThr := result.NewSide("throughput_profile", cpuPerK["throughput"], 1, 1)
	emit("seed_txthread_rr_cpu_per_1000_transactions_latency_vs_throughput", "ms of CPU per 1000 transactions", kLat, kThr, nil,
		"none: reported beside the rate (busy-polling spends CPU while it waits, so the latency profile is expected to cost more per transaction)",
		nil, map[string]any{"rr": rrDesc, "transaction_time": txTimeNote(thr.Value)})
	return nil
}

func boolp(v bool) *bool { return &v }

// txTimeNote sets a transaction's time here against the busy-poll window.
func txTimeNote(tps float64) string {
	if tps <= 0 {
		return "no transactions"
	}
	return fmt.Sprintf("a transaction took %.2f ms here (median of the throughput side), against netctl's 50 µs busy-poll window and about %.2f ms in the seed (bare metal): when the next request comes milliseconds after the last, a vhost worker that polls for 50 µs (of L1's emulated time) has gone back to sleep long before it, so busy-polling can hardly change the rate here; what it costs shows in the CPU per 1000 transactions",
		1000/tps, 1000/rrSeedThroughput)
}

// ratio is the ratio of the medians as result.Finish computes it.
func ratio(a, b result.Side) float64 {
	if b.Value == 0 {
		return 0
	}
	return result.Round(a.Value/b.Value, 3)
}

// tcgNote says plainly what the emulation does to the figures.
func tcgNote(accel string) string {
	common := "The L1 test VM runs under TCG on this host (its /dev/kvm is unusable), so every instruction of L1 - its vhost-net workers, its bridge, its tap - is emulated, tens of host instructions each; the figures are orders of magnitude below the seeds' bare-metal ones and only the ratios compare. The L1 VM has 2 vCPUs shared by both guests' vCPU threads, their vhost workers and the bench: a round's throughput is largely what the scheduler gave it. The CPU lines divide out how much CPU L1 gave the guests, but not the time this host took from L1's vCPUs (see cpu_accounting): in trial runs they resolved in some runs and not in others. Offloads save per-packet work (fewer, larger segments, no checksums); copies of the payload remain, and under TCG a copy costs far more relative to per-packet work than on real CPUs, so the offload ratio is expected below the seed's. Busy-polling spins a vhost worker on one of L1's 2 emulated vCPUs that the guests' vCPUs also need, where the seed had idle cores to spin on; its gain depends on that spare CPU, not on netctl."
	if accel == "kvm" {
		return "Nested guests under KVM in L1 (kvm_amd: TCG emulates AMD SVM with nested paging): guest code runs as L1's KVM guest mode, emulated by the host's TCG, and each guest exit (a virtqueue kick, an interrupt) is a VM exit into L1's KVM, itself emulated: kicks and interrupts cost much more than on bare metal, which weighs on request/response more than on streams. " + common
	}
	return "Nested guests under TCG inside the TCG L1 (TCG in TCG: every guest instruction is translated twice over; nested KVM was not used, see kvm_unavailable): the guests' own CPU work (the TCP stack, the copies, the virtio-net driver) dominates all figures. " + common
}

// bootSeedGuests starts guests A and B paused, attaches their two NICs
// each with netctl, enslaves the taps to the bridges, lets them run and
// waits for their agents on both NICs.
func bootSeedGuests(ctx context.Context, kernel, runDir, accel string) (gs []*seedGuest, took time.Duration, err error) {
	t0 := time.Now()
	defer func() {
		if err != nil {
			for _, g := range gs {
				g.Close()
			}
			gs = nil
		}
	}()
	for i, name := range []string{"a", "b"} {
		g := &seedGuest{name: name, mac1: fmt.Sprintf("52:54:00:13:%02x:01", i), mac2: fmt.Sprintf("52:54:00:13:%02x:02", i),
			ip1: fmt.Sprintf("10.93.0.%d", i+2), ip2: fmt.Sprintf("10.94.0.%d", i+2)}
		ng, err := bootSeedQEMU(ctx, kernel, name, accel, g.ip1+"/24", g.ip2+"/24")
		if err != nil {
			return gs, 0, err
		}
		g.nestedGuest = ng
		gs = append(gs, g)
		for j, p := range []struct{ id, mac, profile, br string }{{"nic1", g.mac1, "throughput", seedBr1}, {"nic2", g.mac2, "latency", seedBr2}} {
			tap, bp, err := netctlAttach(g.QMP, runDir, p.id, p.mac, p.profile)
			if err != nil {
				return gs, 0, fmt.Errorf("guest %s: %w", name, err)
			}
			g.taps[j], g.busyPoll[j] = tap, bp
			if err := enslave(tap, p.br); err != nil {
				return gs, 0, err
			}
		}
		c, err := qmp.Dial(ctx, g.QMP)
		if err != nil {
			return gs, 0, err
		}
		err = c.Run(ctx, "cont", nil, nil)
		c.Close()
		if err != nil {
			return gs, 0, fmt.Errorf("guest %s: cont: %w", name, err)
		}
		// Under TCG one guest boots at a time: two booting at once in
		// trial runs took 7 minutes. (Nested TCG guests' kernels crashed
		// at boot in 3 of 4 trial runs of this bench, one of them booting
		// alone: an IRETQ in text_poke_early, a fault in __kmalloc; the
		// datapath bench's single TCG guest booted.)
		if accel == "tcg" {
			if err := waitAgents(ctx, g, 420*time.Second); err != nil {
				return gs, 0, err
			}
		}
	}
	for _, g := range gs {
		if err := waitAgents(ctx, g, 180*time.Second); err != nil {
			return gs, 0, err
		}
	}
	return gs, time.Since(t0), nil
}

// waitAgents waits for g's agent on both its NICs.
func waitAgents(ctx context.Context, g *seedGuest, timeout time.Duration) error {
	for _, ip := range []string{g.ip1, g.ip2} {
		if err := g.wait(ctx, timeout, func() bool { _, err := l2guest.AgentCmd(ip, "ping"); return err == nil }); err != nil {
			return fmt.Errorf("guest %s's agent at %s: %w; console:\n%s", g.name, ip, err, l2guest.Tail(g.Console(), 2000))
		}
	}
	return nil
}

// bootSeedQEMU writes one guest's files under benchDir/NAME and starts its
// QEMU paused, with no NIC.
func bootSeedQEMU(ctx context.Context, kernel, name, accel, addr01, addr02 string) (*nestedGuest, error) {
	rel := benchDir + "/" + name
	dir := l2.Root + rel
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := l2guest.WriteFiles(ctx, kernel, *agent, l2guest.Init(addr01, addr02), dir); err != nil {
		return nil, err
	}
	g := &nestedGuest{QMP: dir + "/qmp.sock", Serial: dir + "/serial.log", done: make(chan struct{})}
	os.Remove(g.QMP)
	os.Remove(g.Serial)
	args := []string{l2.QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-S",
		"-machine", "pc", "-accel", accel, "-cpu", "max,erms=off", "-m", "512", "-smp", "1",
		"-kernel", rel + "/vmlinux", "-initrd", rel + "/initrd.gz",
		"-append", "console=ttyS0 quiet panic=-1 mitigations=off " + l2.BootTrims,
		"-serial", "file:" + rel + "/serial.log",
		"-qmp", "unix:" + rel + "/qmp.sock,server=on,wait=off"}
	g.cmd = exec.Command("chroot", append([]string{l2.Root}, args...)...)
	g.cmd.Stderr = &g.stderr
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start guest %s's QEMU: %w", name, err)
	}
	go func() { g.cmd.Wait(); close(g.done) }()
	if err := g.wait(ctx, 30*time.Second, func() bool { _, err := os.Stat(g.QMP); return err == nil }); err != nil {
		g.Close()
		return nil, fmt.Errorf("guest %s's QMP socket: %w", name, err)
	}
	return g, nil
}

// netctlAttach attaches a vhost-net NIC with netctl attach --profile and
// returns its tap and the busy_poll_us of the record it printed.
func netctlAttach(qmpPath, runDir, id, mac, profile string) (string, uint32, error) {
	cmd := exec.Command(*netctlBin, "attach", "--qmp", qmpPath, "--id", id, "--mac", mac, "--backend", "vhost-net", "--profile", profile, "--json")
	cmd.Env = append(os.Environ(), "NETCTL_RUN_DIR="+filepath.Join(runDir, "run"))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("netctl attach --profile %s: %w: %s", profile, err, stderr.Bytes())
	}
	var nic struct {
		Backend string `json:"backend"`
		Tap     struct {
			Name string `json:"name"`
		} `json:"tap"`
		BusyPollUS uint32 `json:"busy_poll_us"`
	}
	if err := json.Unmarshal(out.Bytes(), &nic); err != nil || nic.Tap.Name == "" || nic.Backend != "vhost-net" {
		return "", 0, fmt.Errorf("netctl attach --json printed %.300q (want a tap on vhost-net): %v", out.Bytes(), err)
	}
	if (profile == "latency") != (nic.BusyPollUS > 0) {
		return "", 0, fmt.Errorf("netctl attach --profile %s recorded busy_poll_us %d: the comparison needs busy-polling on the latency side only", profile, nic.BusyPollUS)
	}
	return nic.Tap.Name, nic.BusyPollUS, nil
}

func enslave(tap, br string) error {
	t, err := vnl.LinkByName(tap)
	if err != nil {
		return err
	}
	b, err := vnl.LinkByName(br)
	if err != nil {
		return err
	}
	if err := vnl.LinkSetMaster(t, b); err != nil {
		return fmt.Errorf("%s into bridge %s: %w", tap, br, err)
	}
	return vnl.LinkSetUp(t)
}

// cpuMS is the utime+stime of the processes, in ms: /proc/PID/stat fields
// 14 and 15, in USER_HZ ticks (100 on x86 Linux), for the whole thread
// group, exited threads included.
func cpuMS(pids []int) (float64, error) {
	var t float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %.100q", pid, s)
		}
		for _, x := range f[11:13] { // fields 14 (utime) and 15 (stime); f[0] is field 3
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			t += float64(v) * 10
		}
	}
	return t, nil
}
