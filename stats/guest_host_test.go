package stats

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/guest"
)

// Tolerances of TestHostGuestQueues, stated once:
//
//   - ringTolerance: the guest's ethtool counters and netctl's ring
//     indices are read one after the other, not at one instant; the
//     guest sends a few frames of its own (IPv6 router solicitations,
//     ARP) meanwhile. They must agree within this many descriptors.
//   - quietMax: a queue that carried none of the pinned flow may still
//     see that background, and tun may steer the flow's first reply
//     before it has learnt the flow's queue: at most this many
//     descriptors; the busy queue carries at least pings-quietMax.
//   - refillSlack: the guest refills rx buffers in batches (after a NAPI
//     poll, once half a budget is free), so offered rx descriptors may
//     lag the packets received by up to this many.
//   - linkExtra: the link counters may exceed the ping count by this much
//     (ARP and IPv6 neighbour traffic).
const (
	ringTolerance = 4
	quietMax      = 10
	refillSlack   = 64
	linkExtra     = 10
	pings         = 200
)

// buildEthstats builds testdata/ethstats (a static `ethtool -S`) into
// the guest's share and returns its path in the guest.
func buildEthstats(t *testing.T, g *guest.Guest) string {
	t.Helper()
	out := filepath.Join(g.Dir(), "a", "ethstats")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/ethstats")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build ethstats: %v\n%s", err, b)
	}
	return "/agent/ethstats"
}

// guestQueueStats reads the guest driver's own per-queue packet counters
// (rx_queue_N_packets, tx_queue_N_packets).
func guestQueueStats(ctx context.Context, t *testing.T, g *guest.Guest, tool, ifname string) map[string]uint64 {
	t.Helper()
	out, rc, err := g.Exec(ctx, tool+" "+ifname)
	if err != nil || rc != 0 {
		t.Fatalf("ethstats in the guest: rc %d, %v\n%s", rc, err, out)
	}
	m := map[string]uint64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				m[f[0]] = v
			}
		}
	}
	return m
}

func queue(s NICStats, pair int, dir string) QueueStats {
	for _, q := range s.Queues {
		if q.Pair == pair && q.Direction == dir {
			return q
		}
	}
	return QueueStats{Pair: -1}
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestHostGuestQueues: a real QEMU 7.2 guest (6.12 kernel, 2 vCPUs) on a
// 2-queue-pair NIC netctl attached (the userspace path: this host has no
// vhost-net). A ping flood pinned to vCPU 1 (XPS maps it to queue pair 1;
// tun steers the replies of that flow back to the same queue) raises
// pair 1's ring counters and not pair 0's; the guest driver's own
// per-queue packet counters (ethtool -S) agree with netctl's descriptors;
// the link counters match the ping count. Then the faults: the monitor
// held by another client (the holder named, rings still read from the
// cached addresses), the NIC detached (its sources say gone, another
// NIC's come back), QEMU killed mid-collection (VM gone, no hang).
func TestHostGuestQueues(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	t.Setenv("TMPDIR", t.TempDir())
	g, err := guest.Boot(ctx, guest.Options{SMP: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	dir := t.TempDir()
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP(), ID: "net1", Queues: 2, MAC: "52:54:00:91:00:02", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nic2, err := attach.Attach(ctx, attach.Request{QMP: g.QMP(), ID: "net2", Queues: 1, MAC: "52:54:00:92:00:02", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ifname, err := g.WaitNIC(ctx, []byte{0x52, 0x54, 0, 0x91, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitNIC(ctx, []byte{0x52, 0x54, 0, 0x92, 0, 2}); err != nil {
		t.Fatal(err)
	}
	guest.HostAddr(t, nic.Tap.Name, "10.91.0.1/24")
	if err := g.SetAddr(ctx, ifname, "10.91.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx, "10.91.0.1", 1); err != nil { // ARP settled before counting
		t.Fatal(err)
	}
	tool := buildEthstats(t, g)

	ts, err := Targets(ctx, dir, "", g.QMP())
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].NIC != "net1" || ts[1].NIC != "net2" || ts[0].QueuePairs != 2 || ts[0].Link != nic.Tap.Name || ts[0].Backend != "userspace" {
		t.Fatalf("targets (state + QMP, deduplicated): %+v", ts)
	}
	// The same NICs found over QMP alone: the taps QEMU got as fds are
	// named from its fdinfo.
	qts, err := Targets(ctx, t.TempDir(), "", g.QMP())
	if err != nil || len(qts) != 2 || qts[0].Link != nic.Tap.Name || qts[1].Link != nic2.Tap.Name || qts[0].QueuePairs != 2 || qts[0].PID != nic.QEMUPID {
		t.Errorf("targets from QMP alone: %+v, %v", qts, err)
	}
	c := NewCollector(Options{Deadline: 30 * time.Second})
	before := c.Collect(ctx, ts)
	for _, s := range before {
		if len(s.Queues) != 2*s.Target.QueuePairs || s.Link == nil || len(s.Missing) != 0 {
			t.Fatalf("%s: queues %+v link %+v missing %v", s.Target.NIC, s.Queues, s.Link, s.Missing)
		}
	}
	t.Logf("before: %+v link %+v", before[0].Queues, before[0].Link)

	out, rc, err := g.Exec(ctx, fmt.Sprintf("taskset 2 ping -q -c %d -i 0.01 -W 5 10.91.0.1", pings))
	if err != nil || rc != 0 || !strings.Contains(out, fmt.Sprintf("%d packets received", pings)) {
		t.Fatalf("ping flood on vCPU 1: rc %d %v\n%s", rc, err, out)
	}
	after := c.Collect(ctx, ts)
	gs := guestQueueStats(ctx, t, g, tool, ifname)
	again := c.Collect(ctx, ts)
	a, b := after[0], before[0]
	if len(a.Queues) != 4 {
		t.Fatalf("after: queues %+v missing %v", a.Queues, a.Missing)
	}
	t.Logf("after: %+v link %+v; guest: %v", a.Queues, a.Link, gs)
	for _, d := range []string{"rx", "tx"} {
		busy := queue(a, 1, d).Completed - queue(b, 1, d).Completed
		quiet := queue(a, 0, d).Completed - queue(b, 0, d).Completed
		if busy+quiet < pings || busy < pings-quietMax || quiet > quietMax {
			t.Errorf("%s: pair 1 completed %d descriptors, pair 0 %d; want >= %d in all, >= %d on pair 1 (the pinned flow) and <= %d on pair 0",
				d, busy, quiet, pings, pings-quietMax, quietMax)
		}
		if off := queue(a, 1, d).Offered - queue(b, 1, d).Offered; off+refillSlack < busy {
			t.Errorf("%s: pair 1 offered %d descriptors and completed %d (slack %d)", d, off, busy, refillSlack)
		}
		// The guest's counters lie between netctl's reads before and after.
		for p := 0; p < 2; p++ {
			g, ok := gs[fmt.Sprintf("%s_queue_%d_packets", d, p)]
			if !ok {
				t.Fatalf("the guest has no %s_queue_%d_packets: %v", d, p, gs)
			}
			// The raw used index: the counts start at 0 at netctl's first read.
			lo, hi := uint64(queue(a, p, d).UsedIdx), uint64(queue(again[0], p, d).UsedIdx)
			if g+ringTolerance < lo || g > hi+ringTolerance {
				t.Errorf("%s queue %d: the guest counted %d packets; netctl's used index read %d before and %d after (tolerance %d)", d, p, g, lo, hi, ringTolerance)
			}
		}
	}
	rx := a.Link.RX.Packets - b.Link.RX.Packets
	tx := a.Link.TX.Packets - b.Link.TX.Packets
	if rx < pings || rx > pings+linkExtra || tx < pings || tx > pings+linkExtra {
		t.Errorf("link: guest rx %d, tx %d packets for %d pings each way (+%d allowed)", rx, tx, pings, linkExtra)
	}
	r := Rate(b, a)
	ringSecs := a.RingsTime.Sub(b.RingsTime).Seconds() // each source's rate is over its own read times
	for _, q := range r.Queues {
		if d := queue(a, q.Pair, q.Direction).Completed - queue(b, q.Pair, q.Direction).Completed; math.Abs(q.Completed*ringSecs-float64(d)) > 1e-6 {
			t.Errorf("rate %+v over the rings' %.3fs does not give the %d descriptors counted", q, ringSecs, d)
		}
	}
	t.Logf("rates over %.2fs: %+v link %+v", r.Seconds, r.Queues, r.Link)

	driverReload(ctx, t, g, c, ts, tool, ifname)

	// The monitor held by another client: Missing says who; the rings
	// are still read from their cached addresses.
	held, err := qmp.Dial(ctx, g.QMP())
	if err != nil {
		t.Fatal(err)
	}
	busy := c.Collect(ctx, ts)
	held.Close()
	for _, s := range busy {
		why := s.Missing[SourceQMP]
		if !strings.Contains(why, "monitor busy") || !strings.Contains(why, fmt.Sprint(os.Getpid())) || len(s.Queues) == 0 || s.Link == nil {
			t.Errorf("%s with the monitor held by pid %d: missing %v, queues %v, link %v", s.Target.NIC, os.Getpid(), s.Missing, s.Queues, s.Link)
		}
	}
	t.Logf("held monitor: %s", busy[0].Missing[SourceQMP])

	// net1 detached between collections: it says gone; net2 comes back.
	if err := attach.Detach(ctx, attach.DetachRequest{QMP: g.QMP(), ID: "net1", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	gone := c.Collect(ctx, ts)
	if gone[0].Link != nil || len(gone[0].Queues) != 0 || !strings.Contains(gone[0].Missing[SourceRings], "NIC gone") || !strings.Contains(gone[0].Missing[SourceLink], "gone") {
		t.Errorf("detached net1: link %v queues %v missing %v", gone[0].Link, gone[0].Queues, gone[0].Missing)
	}
	if gone[1].Link == nil || len(gone[1].Queues) != 2 || len(gone[1].Missing) != 0 {
		t.Errorf("net2 after net1 went: link %v queues %v missing %v", gone[1].Link, gone[1].Queues, gone[1].Missing)
	}
	c.Forget(ts[0])
	t.Logf("detached: %v", gone[0].Missing)

	// QEMU killed while collections run: each NIC either came back whole
	// or says why not; then VM gone. A tap-only target outside the VM
	// still comes back.
	other := Target{VM: "other", NIC: "lo", Link: "lo", Ifindex: 1, Backend: "userspace"}
	done := make(chan []NICStats)
	go func() { done <- c.Collect(ctx, []Target{ts[1], other}) }()
	if err := killQEMU(ts[1].PID); err != nil {
		t.Fatal(err)
	}
	mid := <-done
	t.Logf("mid-kill: queues %v missing %v", mid[0].Queues, mid[0].Missing)
	if mid[1].Link == nil {
		t.Errorf("the other target during the kill: %v", mid[1].Missing)
	}
	// SIGKILL is not death yet: until the kernel has torn QEMU down (a
	// zombie, or reaped) its monitor socket may still take a connection
	// that never gets a greeting. "After" means after that.
	for deadline := time.Now().Add(30 * time.Second); alive(ts[1]); {
		if time.Now().After(deadline) {
			t.Fatalf("QEMU pid %d still runs 30 s after SIGKILL", ts[1].PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dead := c.Collect(ctx, []Target{ts[1], other})
	if len(dead[0].Queues) != 0 || !strings.Contains(dead[0].Missing[SourceRings], "gone") || !strings.Contains(dead[0].Missing[SourceQMP], "gone") {
		t.Errorf("after QEMU was killed: queues %v missing %v", dead[0].Queues, dead[0].Missing)
	}
	if dead[1].Link == nil {
		t.Errorf("the other target after the kill: %v", dead[1].Missing)
	}
	t.Logf("dead: %v", dead[0].Missing)
}

func killQEMU(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// driverReload: the guest's virtio_net driver is unbound from net1 and
// bound again (a reset the collections do not see: the driver frees its
// rings and sets up new ones) while the 100 ms sampler reads on; then
// the guest pings again. From the collection before the reload to the
// one after, netctl's counts grow by what the guest's own per-queue
// counters say (they start at 0 with the new driver instance): nothing
// read in the freed rings is counted.
func driverReload(ctx context.Context, t *testing.T, g *guest.Guest, c *Collector, ts []Target, tool, ifname string) {
	dev, rc, err := g.Exec(ctx, "basename $(readlink /sys/class/net/"+ifname+"/device)")
	dev = strings.TrimSpace(dev)
	if err != nil || rc != 0 || !strings.HasPrefix(dev, "virtio") {
		t.Fatalf("the guest's virtio device of %s: %q rc %d %v", ifname, dev, rc, err)
	}
	before := c.Collect(ctx, ts)[0]
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.SampleEvery(sctx, 100*time.Millisecond)
	cmd := fmt.Sprintf("echo %s > /sys/bus/virtio/drivers/virtio_net/unbind && sleep 1 && echo %s > /sys/bus/virtio/drivers/virtio_net/bind", dev, dev)
	if out, rc, err := g.Exec(ctx, cmd); err != nil || rc != 0 {
		t.Fatalf("reload virtio_net on %s: rc %d %v\n%s", dev, rc, err, out)
	}
	name, err := g.WaitNIC(ctx, []byte{0x52, 0x54, 0, 0x91, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetAddr(ctx, name, "10.91.0.2/24"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	if out, rc, err := g.Exec(ctx, fmt.Sprintf("taskset 2 ping -q -c %d -i 0.01 -W 5 10.91.0.1", n)); err != nil || rc != 0 || !strings.Contains(out, fmt.Sprintf("%d packets received", n)) {
		t.Fatalf("ping after the reload: rc %d %v\n%s", rc, err, out)
	}
	time.Sleep(300 * time.Millisecond) // the sampler reads the new rings at the old addresses, if they are there
	stop()
	after := c.Collect(ctx, ts)[0]
	gs := guestQueueStats(ctx, t, g, tool, name)
	if len(after.Queues) != 4 {
		t.Fatalf("after the reload: queues %+v missing %v", after.Queues, after.Missing)
	}
	for _, d := range []string{"rx", "tx"} {
		for p := 0; p < 2; p++ {
			grew := queue(after, p, d).Completed - queue(before, p, d).Completed
			own := gs[fmt.Sprintf("%s_queue_%d_packets", d, p)]
			t.Logf("reload: %s queue %d: netctl +%d, the guest's driver %d (raw used index %d)", d, p, grew, own, queue(after, p, d).UsedIdx)
			if diff(grew, own) > ringTolerance {
				t.Errorf("reload: %s queue %d: netctl counted %d descriptors across the reload, the guest's new driver %d packets (tolerance %d)", d, p, grew, own, ringTolerance)
			}
		}
	}
}
