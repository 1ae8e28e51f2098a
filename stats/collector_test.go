package stats

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
)

func fakeTarget(f *fakeVM, backend string) Target {
	return Target{VM: "fake", NIC: "net0", QMP: f.sock, PID: os.Getpid(), Backend: backend, NetdevType: "tap", QueuePairs: f.pairs}
}

func counts(s NICStats) [][2]uint64 {
	var c [][2]uint64
	for _, q := range s.Queues {
		c = append(c, [2]uint64{q.Offered, q.Completed})
	}
	return c
}

// TestCollectRingsWraps: the rings source against a fake QEMU whose
// guest memory is in this process: indices accumulate across the 16-bit
// wrap (in Collect and in Sample between collections), the addresses are
// resolved once and cached, a device reset (status change) restarts the
// rings without losing the counts, and an unplugged device says so.
func TestCollectRingsWraps(t *testing.T) {
	f := newFakeVM(t, 2, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	ctx := context.Background()
	tg := fakeTarget(f, policy.BackendUserspace)
	f.setIdx(0, 65530, 65500)
	f.setIdx(1, 3, 3)
	s := c.Collect(ctx, []Target{tg})[0]
	if len(s.Queues) != 4 || s.Missing[SourceRings] != "" {
		t.Fatalf("queues %+v missing %v", s.Queues, s.Missing)
	}
	// The counts start at 0 (the first read is the base); the raw
	// indices are there too.
	if got := counts(s); !slices.Equal(got, [][2]uint64{{0, 0}, {0, 0}, {0, 0}, {0, 0}}) {
		t.Errorf("first sample %v", got)
	}
	if q := s.Queues[0]; q.AvailIdx != 65530 || q.UsedIdx != 65500 {
		t.Errorf("raw indices %+v", q)
	}
	if s.Queues[1].Direction != "tx" || s.Queues[2].Pair != 1 || s.Queues[2].Direction != "rx" {
		t.Errorf("queue naming %+v", s.Queues)
	}
	f.mu.Lock()
	resolves := f.gpa2hva
	f.mu.Unlock()
	// Past the wrap: 65530 -> 10 is 16 more.
	f.setIdx(0, 10, 4)
	s = c.Collect(ctx, []Target{tg})[0]
	if got := counts(s)[0]; got != [2]uint64{16, 40} {
		t.Errorf("after the wrap: %v, want [16 40]", got)
	}
	f.mu.Lock()
	if f.gpa2hva != resolves {
		t.Errorf("gpa2hva asked %d more times: the addresses must be cached", f.gpa2hva-resolves)
	}
	f.mu.Unlock()
	// Sample between collections catches a wrap Collect alone would miss:
	// +30000 three times is 90000, more than one 16-bit turn.
	f.setIdx(2, 30000, 30000)
	c.Sample()
	f.setIdx(2, 60000, 60000)
	c.Sample()
	f.setIdx(2, 24464, 24464) // 90000 mod 65536
	s = c.Collect(ctx, []Target{tg})[0]
	if got := counts(s)[2]; got != [2]uint64{90000, 90000} {
		t.Errorf("pair 1 rx after three Sample-followed steps: %v, want 90000", got)
	}
	// Indices that break the ring's invariant (avail 600 ahead of used on
	// a 256-entry ring, more than twice its size): the addresses are
	// resolved again, and the reading refused until they hold a ring.
	f.setIdx(1, 3+600, 3)
	s = c.Collect(ctx, []Target{tg})[0]
	if len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "the ring moved") {
		t.Errorf("inconsistent indices: %+v %v", s.Queues, s.Missing)
	}
	f.setIdx(1, 3, 3)
	// A device reset: the driver starts its rings at 0 again.
	f.mu.Lock()
	f.statuses = f.statuses[:2]
	f.mu.Unlock()
	s = c.Collect(ctx, []Target{tg})[0]
	if len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "has not started the device (status ACKNOWLEDGE|DRIVER)") {
		t.Errorf("during the reset: %+v %v", s.Queues, s.Missing)
	}
	f.mu.Lock()
	f.statuses = append(f.statuses, "VIRTIO_CONFIG_S_FEATURES_OK: x", "VIRTIO_CONFIG_S_DRIVER_OK: x", "VIRTIO_CONFIG_S_NEEDS_RESET: x")
	f.mu.Unlock()
	f.setIdx(0, 5, 5)
	s = c.Collect(ctx, []Target{tg})[0]
	if got := counts(s)[0]; got != [2]uint64{21, 45} {
		t.Errorf("after the reset: %v, want the counts to go on (+5)", got)
	}
	// Unplugged: the NIC says gone; the other target still comes back.
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
	other := Target{VM: "other", NIC: "lo", Link: "lo", Backend: policy.BackendUserspace}
	both := c.Collect(ctx, []Target{tg, other})
	if !strings.Contains(both[0].Missing[SourceRings], "NIC gone") || len(both[0].Queues) != 0 {
		t.Errorf("unplugged: %v", both[0].Missing)
	}
	if both[1].Target.NIC != "lo" || both[1].Missing[SourceRings] == "" {
		t.Errorf("the other target: %+v", both[1])
	}
}

// TestCollectVhostNeverStopsRings: with vhost started, the queues of the
// vhost device QEMU answers x-query-virtio-vhost-queue-status for come
// from it, and x-query-virtio-queue-status (which asks the backend for
// its ring base, stopping a vhost-user ring) is asked only for the
// queues outside it.
func TestCollectVhostNeverStopsRings(t *testing.T) {
	f := newFakeVM(t, 2, true)
	for q := 0; q < 4; q++ {
		f.setIdx(q, uint16(10*q+1), uint16(10*q))
	}
	c := NewCollector(Options{})
	s := c.Collect(context.Background(), []Target{fakeTarget(f, policy.BackendVhostNet)})[0]
	var raw [][2]uint16
	for _, q := range s.Queues {
		raw = append(raw, [2]uint16{q.AvailIdx, q.UsedIdx})
	}
	if !slices.Equal(raw, [][2]uint16{{1, 0}, {11, 10}, {21, 20}, {31, 30}}) {
		t.Errorf("queues %v missing %v", raw, s.Missing)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.asked {
		if a == "queue-status 0" || a == "queue-status 1" {
			t.Errorf("asked %s of a vhost device's own queue (asked: %v)", a, f.asked)
		}
	}
	if !slices.Contains(f.asked, "queue-status 2") {
		t.Errorf("asked %v: queue 2 needs x-query-virtio-queue-status", f.asked)
	}
	// The vhost source: this process has no vhost workers.
	if !strings.Contains(s.Missing[SourceVhost], "no vhost worker") {
		t.Errorf("vhost: %q", s.Missing[SourceVhost])
	}
}

// TestCollectNoMonitor: a target with no monitor, or one whose socket is
// gone, says why; nothing blocks.
func TestCollectNoMonitor(t *testing.T) {
	c := NewCollector(Options{Deadline: 5 * time.Second})
	ts := []Target{
		{VM: "a", NIC: "n", Backend: policy.BackendUserspace},
		{VM: "b", NIC: "n", QMP: "/nonexistent/qmp.sock", PID: os.Getpid(), Backend: policy.BackendUserspace},
	}
	out := c.Collect(context.Background(), ts)
	if !strings.Contains(out[0].Missing[SourceQMP], "no QMP monitor") || !strings.Contains(out[0].Missing[SourceRings], "no ring addresses yet") {
		t.Errorf("no monitor: %v", out[0].Missing)
	}
	if out[1].Missing[SourceQMP] == "" || out[1].Target.VM != "b" {
		t.Errorf("socket gone: %+v", out[1])
	}
	if out[0].Missing[SourceLink] == "" {
		t.Errorf("no link: %v", out[0].Missing)
	}
}

// TestCollectPIDReused: a QEMU restarted under the same pid (pid reuse)
// is another process: its rings start from its own indices, never
// continuing the old QEMU's counts (whose last indices would turn the
// new ones into a jump of up to 65535 descriptors).
func TestCollectPIDReused(t *testing.T) {
	f := newFakeVM(t, 1, false)
	start, err := qemuproc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	tg.PIDStart = start
	// The old QEMU under this pid left ring state behind: counts far on,
	// last indices near the top of the 16-bit range, at the same
	// addresses and under the same status.
	old := tg
	old.PIDStart = start - 1
	st, err := parseVirtioStatus([]byte(`{"name": "virtio-net", "num-vqs": 3, "vhost-started": false, "started": true, "broken": false, "status": {"statuses": ["VIRTIO_CONFIG_S_ACKNOWLEDGE: x", "VIRTIO_CONFIG_S_DRIVER: x", "VIRTIO_CONFIG_S_FEATURES_OK: x", "VIRTIO_CONFIG_S_DRIVER_OK: x"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rs := &ringState{pid: os.Getpid(), pidStart: old.PIDStart, fingerprint: st.fingerprint()}
	for q := 0; q < 2; q++ {
		rs.queues = append(rs.queues, ringQueue{vq: q, num: 256,
			availGPA: uint64(availGPA(0, q)), usedGPA: uint64(usedGPA(0, q)),
			avail: f.hva(uint64(availGPA(0, q))), used: f.hva(uint64(usedGPA(0, q))),
			lastAvail: 60000, lastUsed: 60000, offered: 1 << 20, completed: 1 << 20, primed: true})
	}
	c.rings[old.Key()] = rs
	f.setIdx(0, 1000, 990)
	f.setIdx(1, 7, 7)
	s := c.Collect(context.Background(), []Target{tg})[0]
	if got := counts(s); !slices.Equal(got, [][2]uint64{{0, 0}, {0, 0}}) {
		t.Errorf("the new QEMU's rings: %v (missing %v), want its own counts, from 0", got, s.Missing)
	}
}

// TestCollectResetSameStatus: a device reset that a collection sees
// (the driver not running) and after which the guest's driver comes back
// with the very same status: the rings start at 0 again, so the counts
// go on from the new indices, never from the old ones (which would make
// 5 after 1000 a jump of 64541).
func TestCollectResetSameStatus(t *testing.T) {
	f := newFakeVM(t, 1, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	tg := fakeTarget(f, policy.BackendUserspace)
	ctx := context.Background()
	f.setIdx(0, 1000, 990)
	f.setIdx(1, 20, 20)
	c.Collect(ctx, []Target{tg})
	f.setIdx(0, 1010, 1000)
	if got := counts(c.Collect(ctx, []Target{tg})[0]); !slices.Equal(got, [][2]uint64{{10, 10}, {0, 0}}) {
		t.Fatalf("before the reset: %v", got)
	}
	f.mu.Lock()
	running := f.statuses
	f.statuses = f.statuses[:1]
	f.mu.Unlock()
	f.setIdx(0, 0, 0)
	f.setIdx(1, 0, 0)
	if s := c.Collect(ctx, []Target{tg})[0]; len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "has not started the device") {
		t.Fatalf("during the reset: %+v %v", s.Queues, s.Missing)
	}
	c.Sample() // the zeroed rings of the reset are not a wrap either
	f.mu.Lock()
	f.statuses = running
	f.mu.Unlock()
	f.setIdx(0, 5, 3)
	f.setIdx(1, 2, 2)
	if got := counts(c.Collect(ctx, []Target{tg})[0]); !slices.Equal(got, [][2]uint64{{15, 13}, {2, 2}}) {
		t.Errorf("after the reset: %v, want the counts to go on by the new indices [[15 13] [2 2]]", got)
	}
}

// TestCollectReattached: a NIC detached and attached again under the
// same id (netctl's record says when: Target.Attached) is another
// device whose rings start at 0: its counts are its own, never the old
// device's continued (5 after 1000 would be a jump of 64541).
func TestCollectReattached(t *testing.T) {
	f := newFakeVM(t, 1, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	ctx := context.Background()
	tg := fakeTarget(f, policy.BackendUserspace)
	tg.Attached = time.Unix(1000, 0)
	f.setIdx(0, 1000, 990)
	f.setIdx(1, 20, 20)
	c.Collect(ctx, []Target{tg})
	f.setIdx(0, 1010, 1000)
	if got := counts(c.Collect(ctx, []Target{tg})[0]); !slices.Equal(got, [][2]uint64{{10, 10}, {0, 0}}) {
		t.Fatalf("the first device: %v", got)
	}
	again := tg
	again.Attached = time.Unix(2000, 0)
	f.setIdx(0, 5, 3)
	f.setIdx(1, 2, 2)
	if got := counts(c.Collect(ctx, []Target{again})[0]); !slices.Equal(got, [][2]uint64{{0, 0}, {0, 0}}) {
		t.Errorf("the device attached again: %v, want its own counts, from 0", got)
	}
}
