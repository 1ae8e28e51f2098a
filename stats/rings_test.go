package stats

import (
	"context"
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// grew is how far each queue's counts moved from base to s.
func grew(base, s NICStats) [][2]uint64 {
	b, c := counts(base), counts(s)
	if len(b) != len(c) {
		return c
	}
	out := make([][2]uint64, len(c))
	for i := range c {
		out[i] = [2]uint64{c[i][0] - b[i][0], c[i][1] - b[i][1]}
	}
	return out
}

func equal(a, b [][2]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCollectPauseIsNotReset: pausing the VM (QMP stop) and taking its
// link down stop vhost (vhost-started false, no vhost-dev) while the
// rings stay where they are: the counts go on from the last indices
// seen. Unchanging indices across a pause add nothing; the TX
// descriptors QEMU drops while the link is down are counted once.
func TestCollectPauseIsNotReset(t *testing.T) {
	f := newFakeVM(t, 1, true)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	ctx := context.Background()
	tg := fakeTarget(f, policy.BackendVhostNet)
	tg.NetdevType = "tap"
	f.setIdx(0, 30000, 29800)
	f.setIdx(1, 20000, 20000)
	base := c.Collect(ctx, []Target{tg})[0]
	if len(base.Queues) != 2 {
		t.Fatalf("queues %+v missing %v", base.Queues, base.Missing)
	}
	setVhost := func(on bool) {
		f.mu.Lock()
		f.vhost = on
		f.mu.Unlock()
	}
	for i := 0; i < 2; i++ { // two pauses
		setVhost(false) // stop
		c.Sample()
		if s := c.Collect(ctx, []Target{tg})[0]; !equal(grew(base, s), [][2]uint64{{0, 0}, {0, 0}}) {
			t.Fatalf("pause %d: grew %v (missing %v), want nothing: the indices did not move", i, grew(base, s), s.Missing)
		}
		setVhost(true) // cont
		c.Sample()
		if s := c.Collect(ctx, []Target{tg})[0]; !equal(grew(base, s), [][2]uint64{{0, 0}, {0, 0}}) {
			t.Fatalf("resume %d: grew %v (missing %v), want nothing", i, grew(base, s), s.Missing)
		}
	}
	// set_link off: vhost stops, QEMU drops what the guest sends (the
	// TX ring moves by 10); set_link on: vhost again.
	setVhost(false)
	f.setIdx(1, 20010, 20010)
	c.Sample()
	s := c.Collect(ctx, []Target{tg})[0]
	setVhost(true)
	s = c.Collect(ctx, []Target{tg})[0]
	if !equal(grew(base, s), [][2]uint64{{0, 0}, {10, 10}}) {
		t.Errorf("after the link flap: grew %v (missing %v), want tx +10", grew(base, s), s.Missing)
	}
}

// TestCollectVhostUserNeverGetsRingBase: on a vhost-user NIC,
// x-query-virtio-queue-status of a queue of the vhost device makes QEMU
// 7.2 send GET_VRING_BASE, which stops the ring in the backend for good.
// Even when vhost starts between the status read and the queue queries
// (the status said stopped), the queues of the vhost device are asked
// only with x-query-virtio-vhost-queue-status; while vhost is stopped
// they are left out (pair 1's are read), and counted once it runs.
func TestCollectVhostUserNeverGetsRingBase(t *testing.T) {
	ctx := context.Background()
	// vhost-user, and the netdevs whose ring base is not known to be a
	// harmless read: vhost-vdpa (the parent driver is asked), unknown.
	for _, nt := range []string{"vhost-user", "vhost-vdpa", ""} {
		t.Run("starts between "+nt, func(t *testing.T) {
			f := newFakeVM(t, 2, false)
			f.mu.Lock()
			f.vhostUser = true                     // count every ring base QEMU would ask
			f.onStatus = func() { f.vhost = true } // vhost starts right after the status answer
			f.mu.Unlock()
			tg := fakeTarget(f, BackendVhostUser)
			tg.NetdevType = nt
			c := NewCollector(Options{Deadline: 10 * time.Second})
			s := c.Collect(ctx, []Target{tg})[0]
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.getVringBase != 0 {
				t.Errorf("QEMU asked the backend for its ring base %d times (asked %v): a vhost-user queue is stopped", f.getVringBase, f.asked)
			}
			if len(s.Queues) != 4 {
				t.Errorf("queues %+v missing %v: want all four (vhost runs now)", s.Queues, s.Missing)
			}
		})
	}
	t.Run("stopped", func(t *testing.T) {
		f := newFakeVM(t, 2, false)
		f.mu.Lock()
		f.vhostUser = true
		f.mu.Unlock()
		tg := fakeTarget(f, BackendVhostUser)
		tg.NetdevType = "vhost-user"
		c := NewCollector(Options{Deadline: 10 * time.Second})
		s := c.Collect(ctx, []Target{tg})[0]
		f.mu.Lock()
		for _, a := range f.asked {
			if a == "queue-status 0" || a == "queue-status 1" {
				t.Errorf("asked %s of a vhost-user NIC (asked %v)", a, f.asked)
			}
		}
		f.vhost = true
		f.mu.Unlock()
		if len(s.Queues) != 2 || s.Queues[0].Pair != 1 {
			t.Errorf("vhost stopped: queues %+v missing %v: want pair 1's", s.Queues, s.Missing)
		}
		f.setIdx(0, 7, 7)
		s = c.Collect(ctx, []Target{tg})[0]
		if len(s.Queues) != 4 {
			t.Errorf("vhost started: queues %+v missing %v: want all four", s.Queues, s.Missing)
		}
		f.mu.Lock()
		if f.getVringBase != 0 {
			t.Errorf("GET_VRING_BASE sent %d times", f.getVringBase)
		}
		f.mu.Unlock()
	})
}

// TestSampleResetBetweenCollections: the guest resets the device
// between two collections (a reboot, a driver reload) and the sampler
// goes on reading the old rings' memory, now freed: random bytes, or
// zeroes. Nothing it reads there may be counted: after the next
// collection the counts are what the old rings did before the reset
// plus what the new rings did since (from 0).
func TestSampleResetBetweenCollections(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		at       [2]uint16 // the old rings' indices before the reset
		freed    func(rng *rand.Rand, f *fakeVM)
		sameAddr bool // the new rings are where the old ones were
	}{
		{name: "random", at: [2]uint16{1000, 990}, freed: func(rng *rand.Rand, f *fakeVM) {
			for q := 0; q < 2; q++ {
				binary.LittleEndian.PutUint32(f.mem[availGPA(0, q):], rng.Uint32())
				binary.LittleEndian.PutUint32(f.mem[usedGPA(0, q):], rng.Uint32())
			}
		}},
		{name: "zeroed", at: [2]uint16{40000, 39990}, freed: func(_ *rand.Rand, f *fakeVM) {
			f.setRing(0, 0, 0, 0, 0, 0)
			f.setRing(0, 1, 0, 0, 0, 0)
		}},
		{name: "same place", at: [2]uint16{40000, 39990}, sameAddr: true, freed: func(_ *rand.Rand, f *fakeVM) {
			f.setRing(0, 0, 0, 0, 0, 0)
			f.setRing(0, 1, 0, 0, 0, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeVM(t, 1, false)
			c := NewCollector(Options{Deadline: 10 * time.Second})
			tg := fakeTarget(f, policy.BackendUserspace)
			tg.NetdevType = "tap"
			f.setIdx(0, tc.at[0], tc.at[1])
			f.setIdx(1, 500, 500)
			base := c.Collect(ctx, []Target{tg})[0]
			f.setIdx(0, tc.at[0]+10, tc.at[1]+10)
			f.setIdx(1, 504, 504)
			c.Sample()
			// The reset: the rings are freed, the driver sets up new ones.
			f.mu.Lock()
			if !tc.sameAddr {
				f.gen = 1
			}
			f.mu.Unlock()
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < 5000; i++ {
				tc.freed(rng, f)
				c.Sample()
			}
			f.setIdx(0, 256, 3)
			f.setIdx(1, 2, 2)
			s := c.Collect(ctx, []Target{tg})[0]
			want := [][2]uint64{{10 + 256, 10 + 3}, {4 + 2, 4 + 2}}
			if got := grew(base, s); !equal(got, want) {
				t.Errorf("grew %v (missing %v), want %v: before the reset, then the new rings from 0", got, s.Missing, want)
			}
			// And it goes on from there.
			f.setIdx(0, 300, 40)
			c.Sample()
			s = c.Collect(ctx, []Target{tg})[0]
			want[0] = [2]uint64{10 + 300, 10 + 40}
			if got := grew(base, s); !equal(got, want) {
				t.Errorf("then grew %v (missing %v), want %v", got, s.Missing, want)
			}
		})
	}
}

// TestCollectPackedRing: a packed ring (VIRTIO_F_RING_PACKED
// negotiated) has no split ring's indices: its rings are not counted,
// and the rings source says so.
func TestCollectPackedRing(t *testing.T) {
	f := newFakeVM(t, 1, false)
	f.mu.Lock()
	f.packed = true
	f.mu.Unlock()
	tg := fakeTarget(f, policy.BackendUserspace)
	tg.NetdevType = "tap"
	s := NewCollector(Options{}).Collect(context.Background(), []Target{tg})[0]
	if len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "packed ring: not counted") {
		t.Errorf("queues %+v missing %v", s.Queues, s.Missing)
	}
}
