package stats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/test/vhostrig"
	"github.com/netctl/netctl/vdpa"
)

// TestVM runs in the 6.12 and 6.1 VMs, one boot each.
func TestVM(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	t.Run("workers", func(t *testing.T) { testWorkers(t, k) })
	t.Run("vdpa", func(t *testing.T) { testVDPA(t, k) })
	t.Run("rings_vhost", func(t *testing.T) { testRingsVhost(t, k) })
	t.Run("migration", func(t *testing.T) { testMigration(t, k) })
	t.Run("rings_vhost_linux", func(t *testing.T) { testRingsVhostLinux(t, k) })
}

// testRingsVhostLinux: a nested Linux guest (test/l2, the VM's own
// kernel, one vCPU) on a 2-pair NIC whose tap QEMU opened itself with
// vhost=on, found over QMP alone. The Linux driver sets up every queue
// (it turns on one pair per vCPU), so the stats read all four rings:
// pair 0's from x-query-virtio-vhost-queue-status, pair 1's, which that
// command refuses on QEMU 7.2 ("Invalid vhost virtqueue number"), from
// x-query-virtio-queue-status; pair 0's RX ring holds the buffers the
// driver posted, and its TX used index matches the packets the tap got
// from the guest (its IPv6 neighbour traffic).
func testRingsVhostLinux(t *testing.T, k *testenv.Kernel) {
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec (make test-vm)")
	}
	// Two boots of the guest (the second one a reboot). On nested KVM
	// they take seconds; on TCG inside the TCG test VM (no KVM) each takes
	// minutes on a loaded host (a boot that reached init after 207 s was
	// seen; a reboot took over 5 minutes with two other VMs on 2 cores),
	// so up to 8-9 minutes each.
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Minute)
	defer cancel()
	mac, trigger := "52:54:00:94:00:02", "52:54:00:94:00:03"
	// nic1 is only the trigger of the guest's driver resets (RebindOn).
	g, _, err := l2.StartLinux(ctx, l2.Config{Vmlinuz: vmlinuz, Accel: l2.PreferKVM(t.Logf), Reboot: true, RebindOn: trigger, NICs: []l2.NIC{
		{ID: "nic0", MAC: mac, Tap: "l2st0", Netdev: "queues=2", Device: "mq=on,vectors=6"},
		{ID: "nic1", MAC: trigger, Tap: "l2st1", NoVhost: true}}}, 2, 8*time.Minute, t.Logf)
	if g != nil {
		defer func() {
			if t.Failed() {
				t.Logf("L2 stderr:\n%s\nconsole:\n%s", g.Stderr(), g.Console())
			}
			g.Close()
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	all, err := Targets(ctx, t.TempDir(), "", g.QMP)
	var ts []Target
	nic0 := -1
	for i, tg := range all {
		if tg.NIC == "nic0" {
			ts, nic0 = append(ts, tg), i
		}
	}
	if err != nil || len(all) != 2 || len(ts) != 1 {
		t.Fatalf("targets %+v: %v", all, err)
	}
	tg := ts[0]
	if tg.Backend != policy.BackendVhostNet || tg.Link != "l2st0" || tg.QueuePairs != 2 || tg.PID != g.PID {
		t.Errorf("target from QMP: %+v", tg)
	}
	c := NewCollector(Options{Deadline: 30 * time.Second})
	var s NICStats
	// The guest's driver may still be starting: wait for DRIVER_OK.
	for ctx.Err() == nil {
		s = c.Collect(ctx, all)[nic0]
		if !strings.Contains(s.Missing[SourceRings], "has not started the device") {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("kernel %s: queues %+v link %+v workers %+v missing %v", k.Name, s.Queues, s.Link, s.Workers, s.Missing)
	if len(s.Queues) != 4 {
		t.Fatalf("queues %+v, missing %v: want all four", s.Queues, s.Missing)
	}
	if rx := queue(s, 0, "rx"); rx.AvailIdx == 0 {
		t.Errorf("pair 0 rx %+v: the driver posts receive buffers when the link comes up", rx)
	}
	if tx := queue(s, 0, "tx"); s.Link == nil || diff(uint64(tx.UsedIdx), s.Link.TX.Packets) > 2 {
		t.Errorf("pair 0 tx %+v, tap %+v: want its used index to match the packets from the guest (within 2)", tx, s.Link)
	}
	if len(s.Workers) != 2 || s.Workers[0].Comm != "vhost-"+strconv.Itoa(g.PID) {
		t.Errorf("workers %+v", s.Workers)
	}
	pauseAndFlap(ctx, t, c, g.QMP, "nic0", ts[0], s)
	rebindAndReboot(ctx, t, c, g, ts[0], mac)
}

// qmpRun runs one QMP command on sock (a connection of its own).
func qmpRun(ctx context.Context, t *testing.T, sock, cmd string, args any) {
	t.Helper()
	qc, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	if _, err := qc.Execute(ctx, cmd, args); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
}

// waitConsole waits until the L2 console holds n lines matching re.
func waitConsole(ctx context.Context, t *testing.T, g *l2.Guest, re *regexp.Regexp, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for len(re.FindAllString(g.Console(), -1)) < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the L2 console has not shown %q %d times after %v:\n%s", re, n, timeout, g.Console())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rebindAndReboot: with the 100 ms sampler running, the guest's driver
// resets nic0 twice (unbind and bind: what a virtio_net reload does to
// the device; its new rings are set up again, likely on the same pages,
// their indices from 0), then the guest reboots (QMP system_reset) and
// its driver starts the device again. The counts go on from where they
// were and never jump: TX completions grow with what the tap received
// from the guest (the packets the guest sent, its own count; a reset
// may leave out the few the guest sent before the next read, never add
// any), the RX ring's offered buffers with the completed ones plus at
// most one ring's refill per reset; no queue grows by more than a few
// hundred.
func rebindAndReboot(ctx context.Context, t *testing.T, c *Collector, g *l2.Guest, tg Target, mac string) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.SampleEvery(sctx, 100*time.Millisecond)
	base := c.Collect(ctx, []Target{tg})[0]
	if len(base.Queues) != 4 || base.Link == nil {
		t.Fatalf("before the resets: queues %+v link %+v missing %v", base.Queues, base.Link, base.Missing)
	}
	check := func(when string, resets int) {
		t.Helper()
		var s NICStats
		// Until the guest's driver has started the device again.
		for i := 0; i < 60; i++ {
			if s = c.Collect(ctx, []Target{tg})[0]; len(s.Queues) == len(base.Queues) && s.Link != nil {
				break
			}
			time.Sleep(time.Second)
		}
		if len(s.Queues) != len(base.Queues) || s.Link == nil {
			t.Fatalf("%s: queues %+v link %+v missing %v", when, s.Queues, s.Link, s.Missing)
		}
		tx, tx0 := queue(s, 0, "tx"), queue(base, 0, "tx")
		rx, rx0 := queue(s, 0, "rx"), queue(base, 0, "rx")
		sent := s.Link.TX.Packets - base.Link.TX.Packets
		grewTx := tx.Completed - tx0.Completed
		if grewTx > sent+2 || grewTx+2+8*uint64(resets) < sent {
			t.Errorf("%s: pair 0 TX completions grew %d, the tap received %d from the guest", when, grewTx, sent)
		}
		if off, done := rx.Offered-rx0.Offered, rx.Completed-rx0.Completed; off > done+64+256*uint64(resets) {
			t.Errorf("%s: pair 0 RX offered grew %d, completed %d: more than a refill per reset", when, off, done)
		}
		for i, q := range s.Queues {
			q0 := base.Queues[i]
			if q.Offered-q0.Offered > 2000 || q.Completed-q0.Completed > 2000 {
				t.Errorf("%s: queue %d/%s grew offered %d completed %d: a jump", when, q.Pair, q.Direction, q.Offered-q0.Offered, q.Completed-q0.Completed)
			}
		}
		t.Logf("%s: tx +%d (tap +%d), rx offered +%d completed +%d; queues %+v", when, grewTx, sent,
			rx.Offered-rx0.Offered, rx.Completed-rx0.Completed, s.Queues)
	}
	rebound, rearmed := regexp.MustCompile(`L2-REBOUND \d+ devices=\d+ `), regexp.MustCompile(`L2-REARMED \d+`)
	for i := 1; i <= 2; i++ {
		qmpRun(ctx, t, g.QMP, "set_link", map[string]any{"name": "nic1", "up": false})
		waitConsole(ctx, t, g, rebound, i, 2*time.Minute)
		// The reset happened: nic0 was unbound and bound again, nothing failed.
		if line := rebound.FindAllString(g.Console(), -1)[i-1]; !strings.Contains(line, " devices=1 ") || strings.Contains(g.Console(), "L2-ERR") {
			t.Fatalf("driver reset %d did not happen as asked: %q\n%s", i, line, g.Console())
		}
		qmpRun(ctx, t, g.QMP, "set_link", map[string]any{"name": "nic1", "up": true})
		waitConsole(ctx, t, g, rearmed, i, 2*time.Minute)
		time.Sleep(3 * time.Second) // the driver sends on link up (IPv6 neighbour discovery)
		check(fmt.Sprintf("driver reset %d", i), i)
	}
	qmpRun(ctx, t, g.QMP, "system_reset", nil)
	waitConsole(ctx, t, g, regexp.MustCompile(`L2-INIT`), 2, 9*time.Minute)
	waitConsole(ctx, t, g, regexp.MustCompile(`L2-NIC \S+ mac=`+regexp.QuoteMeta(mac)), 2, 2*time.Minute)
	time.Sleep(3 * time.Second)
	check("rebooted", 3)
}

// pauseAndFlap: QMP stop and cont (what virsh suspend, a snapshot and
// a migration's source do) and set_link off and on stop and start vhost
// while the rings stay where they are: the counts go on from the last
// indices. Twice each, sampled in between (the 100 ms sampler too):
// the guest's TX completions grow with the packets the tap received
// from the guest, and the RX ring's offered buffers with the completed
// ones (the driver refills what the device used), never by a whole
// index (the bug: up to 65535 per queue, twice per pause). The
// backend stays vhost-net while vhost is stopped.
func pauseAndFlap(ctx context.Context, t *testing.T, c *Collector, sock, nic string, tg Target, base NICStats) {
	run := func(cmd string, args any) { t.Helper(); qmpRun(ctx, t, sock, cmd, args) }
	check := func(when string, s NICStats, linkDown bool) {
		t.Helper()
		if len(s.Queues) != len(base.Queues) || s.Link == nil || base.Link == nil {
			t.Fatalf("%s: queues %+v link %+v missing %v", when, s.Queues, s.Link, s.Missing)
		}
		tx, tx0 := queue(s, 0, "tx"), queue(base, 0, "tx")
		rx, rx0 := queue(s, 0, "rx"), queue(base, 0, "rx")
		sent := s.Link.TX.Packets - base.Link.TX.Packets
		grewTx := tx.Completed - tx0.Completed
		// QEMU drops what the guest sends while the link is down (the tap
		// never sees it): a few more TX completions than tap packets then.
		if grewTx+2 < sent || grewTx > sent+2+map[bool]uint64{true: 16}[linkDown] {
			t.Errorf("%s: pair 0 TX completions grew %d, the tap received %d from the guest", when, grewTx, sent)
		}
		if off, done := rx.Offered-rx0.Offered, rx.Completed-rx0.Completed; off > done+64 {
			t.Errorf("%s: pair 0 RX offered grew %d, completed %d: offered jumped", when, off, done)
		}
		t.Logf("%s: tx +%d (tap +%d), rx offered +%d completed +%d", when, grewTx, sent,
			rx.Offered-rx0.Offered, rx.Completed-rx0.Completed)
	}
	for i := 0; i < 2; i++ {
		run("stop", nil)
		c.Sample()
		check(fmt.Sprintf("paused %d", i), c.Collect(ctx, []Target{tg})[0], false)
		if ts, err := Targets(ctx, t.TempDir(), "", sock); err != nil || len(ts) == 0 || ts[0].NIC != nic || ts[0].Backend != policy.BackendVhostNet {
			t.Errorf("paused %d: targets %+v (%v): want the backend vhost-net still", i, ts, err)
		}
		run("cont", nil)
		time.Sleep(500 * time.Millisecond)
		c.Sample()
		check(fmt.Sprintf("resumed %d", i), c.Collect(ctx, []Target{tg})[0], false)
	}
	for i := 0; i < 2; i++ {
		run("set_link", map[string]any{"name": nic, "up": false})
		time.Sleep(500 * time.Millisecond)
		c.Sample()
		check(fmt.Sprintf("link down %d", i), c.Collect(ctx, []Target{tg})[0], true)
		run("set_link", map[string]any{"name": nic, "up": true})
		time.Sleep(2 * time.Second) // the guest's driver sends on link up (IPv6 neighbour discovery)
		c.Sample()
		check(fmt.Sprintf("link up %d", i), c.Collect(ctx, []Target{tg})[0], true)
	}
}

// testRingsVhost: the host's QEMU 7.2 (chrooted, firmware only) gets a
// 2-pair vhost-net NIC from netctl attach; after cont, iPXE does DHCP
// over it. QEMU never sees those rings itself (its own used-idx stays 0),
// yet the stats read them in QEMU's memory: pair 0's TX used index equals
// the packets the tap received from the guest (every TX chain is one
// packet), its RX used index counts at least the DHCP offer and ack; the
// queues iPXE never set up (pair 1) are left out; x-query-virtio-queue-
// status is never asked for the vhost device's own queues. The workers:
// one per pair, named vhost-<QEMU's pid>.
func testRingsVhost(t *testing.T, k *testenv.Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g, err := l2.StartFirmware(ctx, l2.Firmware{Name: "stats"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	dir := t.TempDir()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x93, 0, 2}
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP, ID: "net1", Backend: policy.BackendVhostNet, Queues: 2, MAC: mac.String(), StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	testenv.LinkUp(t, nic.Tap.Name)
	srv, err := l2.ServeDHCP(nic.Tap.Name, mac)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts, err := Targets(ctx, dir, "", "")
	if err != nil || len(ts) != 1 || ts[0].Backend != policy.BackendVhostNet || ts[0].PID != g.PID {
		t.Fatalf("targets %+v, %v", ts, err)
	}
	c := NewCollector(Options{Deadline: 30 * time.Second})
	paused := c.Collect(ctx, ts)[0]
	if len(paused.Queues) != 0 || !strings.Contains(paused.Missing[SourceRings], "has not started the device") {
		t.Errorf("paused: queues %v missing %v", paused.Queues, paused.Missing)
	}
	if len(paused.Workers) != 2 || paused.Workers[0].Comm != "vhost-"+strconv.Itoa(g.PID) {
		t.Errorf("workers %+v (missing %v): want 2 named vhost-%d", paused.Workers, paused.Missing, g.PID)
	}
	qc, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qc.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	qc.Close()
	dctx, dcancel := context.WithTimeout(ctx, 90*time.Second)
	if _, err := srv.Wait(dctx, l2.DHCPRequest); err != nil {
		t.Fatalf("DHCP: %v (log %v)", err, srv.Log())
	}
	dcancel()
	s := c.Collect(ctx, ts)[0]
	t.Logf("kernel %s: queues %+v link %+v workers %+v missing %v", k.Name, s.Queues, s.Link, s.Workers, s.Missing)
	if len(s.Queues) != 2 || s.Queues[0].Pair != 0 || s.Queues[1].Direction != "tx" {
		t.Fatalf("queues %+v missing %v: want pair 0's two (iPXE sets up no other)", s.Queues, s.Missing)
	}
	rx, tx := s.Queues[0], s.Queues[1]
	if rx.UsedIdx < 2 || tx.UsedIdx < 2 {
		t.Errorf("rx %+v tx %+v: want at least DISCOVER and REQUEST out, OFFER and ACK in", rx, tx)
	}
	// The tap counts every frame the guest sent; read once more around
	// the ring read for frames iPXE sends meanwhile. (The counts start at
	// 0 at netctl's first read; the raw index is the ring's own count.)
	if s.Link == nil || diff(uint64(tx.UsedIdx), s.Link.TX.Packets) > 2 {
		t.Errorf("TX used index %d, the tap's received packets %+v: want equal (within 2 sent in between)", tx.Completed, s.Link)
	}
	// QEMU's own view of a vhost ring: used-idx 0 (the measurement).
	qc, err = qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	raw, err := qc.Execute(ctx, "x-query-virtio-vhost-queue-status", map[string]any{"path": "/machine/peripheral/net1/virtio-backend", "queue": 1})
	t.Logf("x-query-virtio-vhost-queue-status queue 1: %s (%v)", raw, err)
	raw, err = qc.Execute(ctx, "x-query-virtio-vhost-queue-status", map[string]any{"path": "/machine/peripheral/net1/virtio-backend", "queue": 2})
	t.Logf("x-query-virtio-vhost-queue-status queue 2: %s (%v)", raw, err)
	raw, err = qc.Execute(ctx, "x-query-virtio-queue-status", map[string]any{"path": "/machine/peripheral/net1/virtio-backend", "queue": 3})
	t.Logf("x-query-virtio-queue-status queue 3: %s (%v)", raw, err)
}

// testWorkers: a 2-pair vhost-net NIC owned by this process (the
// userspace driver is the guest): the stats find one vhost worker per
// pair, in this process's threads on 6.4+ (6.12) and as kernel threads
// before (6.1); frames pushed through pair 1's TX ring raise pair 1's
// worker CPU time, and pair 0's worker, which carried nothing, less.
func testWorkers(t *testing.T, k *testenv.Kernel) {
	testenv.Host(t)
	rig := vhostrig.New(t, "stw%d", 2)
	tap := rig.Tap

	target := Target{VM: "self", NIC: "vh0", PID: os.Getpid(), Backend: policy.BackendVhostNet, Link: tap.Name(), QueuePairs: 2}
	target.Ifindex = rig.Ifindex
	c := NewCollector(Options{})
	ctx := context.Background()
	before := c.Collect(ctx, []Target{target})[0]
	if len(before.Workers) != 2 {
		t.Fatalf("workers %+v, missing %v; want one per queue pair", before.Workers, before.Missing)
	}
	// The rings and the monitor: there is no QEMU, and the stats say so.
	if !strings.Contains(before.Missing[SourceQMP], "no QMP monitor") || before.Missing[SourceRings] == "" {
		t.Errorf("missing %v: want qmp and rings explained", before.Missing)
	}
	self, _ := os.ReadDir("/proc/self/task")
	inProcess := false
	for _, e := range self {
		if e.Name() == strconv.Itoa(before.Workers[0].TID) {
			inProcess = true
		}
	}
	if want := k.Name != "6.1"; inProcess != want {
		t.Errorf("kernel %s: workers %+v are threads of this process: %v, want %v (vhost_task came in 6.4)", k.Name, before.Workers, inProcess, want)
	}
	for _, w := range before.Workers {
		if !strings.HasPrefix(w.Comm, "vhost-") {
			t.Errorf("worker %+v is not named vhost-<tid>", w)
		}
	}
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(before.Workers[0].TID) + "/stat")
	t.Logf("kernel %s workers: %+v; stat of the first: %s", k.Name, before.Workers, raw)

	const frames = 20000
	rig.Send(t, 1, frames)
	after := c.Collect(ctx, []Target{target})[0]
	if len(after.Workers) != 2 || after.Workers[1].TID != before.Workers[1].TID {
		t.Fatalf("workers after: %+v", after.Workers)
	}
	cpu := func(s NICStats) map[int]float64 {
		m := map[int]float64{}
		for _, w := range s.Workers {
			m[w.Pair] = w.CPUSeconds
		}
		return m
	}
	vhostrig.CheckWorkerCPU(t, fmt.Sprintf("kernel %s, stats, %d frames on pair 1", k.Name, frames), 1, cpu(before), cpu(after))
	if after.Link == nil || after.Link.TX.Packets-before.Link.TX.Packets < frames {
		t.Errorf("link %+v: want the %d frames as guest TX", after.Link, frames)
	}
	r := Rate(before, after)
	if len(r.Workers) != 2 || r.Workers[1].CPUFraction <= 0 {
		t.Errorf("rates %+v", r.Workers)
	}
}

// testVDPA: a VDUSE device's parent has no vendor statistics: the stats
// say "not provided by this driver (vduse)". The 6.1 VM has no vDPA: the
// stats say so instead.
func testVDPA(t *testing.T, k *testenv.Kernel) {
	target := Target{VM: "none", NIC: "vd0", Backend: policy.BackendVDPA, VDPA: "statsvd0", QueuePairs: 1}
	c := NewCollector(Options{})
	if !k.Has("vduse") {
		s := c.Collect(context.Background(), []Target{target})[0]
		if len(s.VDPA) != 0 || !strings.Contains(s.Missing[SourceVDPA], "vdpa") {
			t.Errorf("kernel %s without vdpa: %v %v", k.Name, s.VDPA, s.Missing)
		}
		t.Logf("kernel %s: %s", k.Name, s.Missing[SourceVDPA])
		return
	}
	dev, err := vduse.Create(vduse.Config{Name: "statsvd0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cl, err := vdpa.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.AddDevice(context.Background(), vdpa.AddOptions{Name: "statsvd0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer cl.DeleteDevice(context.Background(), "statsvd0")
	s := c.Collect(context.Background(), []Target{target})[0]
	if len(s.VDPA) != 0 || s.Missing[SourceVDPA] != "not provided by this driver (vduse)" {
		t.Errorf("VDUSE: vdpa %v, missing %q", s.VDPA, s.Missing[SourceVDPA])
	}
	if s.Missing[SourceLink] != "a vdpa NIC has no host link" {
		t.Errorf("link: %q", s.Missing[SourceLink])
	}
	_, _, err = cl.VStats(context.Background(), "statsvd0", 0)
	if !errors.Is(err, vdpa.ErrNotSupported) {
		t.Errorf("the kernel's own answer: %v", err)
	}
	testRingsVDPA(t, k)
}

// testRingsVDPA: a firmware-only QEMU (shared memory) gets a vdpa NIC
// from netctl attach on a VDUSE device served by this process, which
// loops every frame the guest sends back into its receive ring. The
// rings are read through the vhost-vdpa device's own queue status: what
// iPXE sent is used on TX, what came back on RX; the vdpa source says
// the driver has no statistics.
func testRingsVDPA(t *testing.T, k *testenv.Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x95, 0, 2}
	dev, err := vduse.Create(vduse.Config{Name: "netctl-v1", MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	g, err := l2.StartFirmware(ctx, l2.Firmware{Name: "statsvdpa", SharedMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close() // before the vdpa device goes: QEMU's fd would hold it
	dir := t.TempDir()
	nic, err := attach.Attach(ctx, attach.Request{QMP: g.QMP, ID: "v1", Mgmtdev: "vduse", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer attach.Detach(context.Background(), attach.DetachRequest{QMP: g.QMP, ID: "v1", StateDir: dir, Timeout: 10 * time.Second})
	if nic.Backend != policy.BackendVDPA {
		t.Fatalf("backend %s", nic.Backend)
	}
	ts, err := Targets(ctx, dir, "", "")
	if err != nil || len(ts) != 1 || ts[0].VDPA != "netctl-v1" {
		t.Fatalf("targets %+v: %v", ts, err)
	}
	qc, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	_, err = qc.Execute(ctx, "cont", nil)
	qc.Close()
	if err != nil {
		t.Fatal(err)
	}
	for dev.Looped() < 2 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	c := NewCollector(Options{Deadline: 30 * time.Second})
	s := c.Collect(ctx, ts)[0]
	t.Logf("kernel %s: looped %d; queues %+v missing %v", k.Name, dev.Looped(), s.Queues, s.Missing)
	if len(s.Queues) != 2 {
		t.Fatalf("queues %+v, missing %v", s.Queues, s.Missing)
	}
	if rx, tx := queue(s, 0, "rx"), queue(s, 0, "tx"); tx.UsedIdx < 2 || rx.UsedIdx < 2 {
		t.Errorf("rx %+v tx %+v: want the looped frames used on both", rx, tx)
	}
	if s.Missing[SourceVDPA] != "not provided by this driver (vduse)" || s.Missing[SourceLink] != "a vdpa NIC has no host link" {
		t.Errorf("missing %v", s.Missing)
	}
}
