package stats

import (
	"context"
	"strings"
	"testing"
	"time"
)

const testUUID = "6f1c2a7e-58d4-4f4e-9b0a-0c8e2d1f3a42"

// wantCounts fails unless s has queues with exactly these counts
// (offered, completed per queue, in order).
func wantCounts(t *testing.T, when string, s NICStats, want [][2]uint64) {
	t.Helper()
	if got := counts(s); !equal(got, want) {
		t.Fatalf("%s: counts %v (queues %+v, missing %v), want %v", when, got, s.Queues, s.Missing, want)
	}
}

// TestCollectMigrationContinuesRings: a VM with a UUID migrates to a new
// QEMU process on this host (the guest's rings carried over with their
// indices: here, the same memory). While the destination is still loading
// (its device not DRIVER_OK), the source goes on counting; once the
// destination's driver runs, it takes the counts over from the indices
// last read on the source (nothing counted twice, nothing back), and the
// source, still there, paused, yields ("NIC gone from this QEMU"); the
// source quitting and being forgotten changes nothing. Then the VM is
// restarted (a new QEMU of the same UUID that boots the guest itself, no
// -incoming): its rings start at 0, which is a reset: the counts go on
// from where they were, the new rings counted from 0.
func TestCollectMigrationContinuesRings(t *testing.T) {
	ctx := context.Background()
	g := newFakeGuest(t)
	g.setIdx(0, 1000, 990)
	g.setIdx(1, 500, 500)
	src := startFakeQEMU(t, g, 1, testUUID, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	wantCounts(t, "first read", c.Collect(ctx, []Target{src.target()})[0], [][2]uint64{{0, 0}, {0, 0}})
	g.setIdx(0, 1010, 1000)
	c.Sample()
	wantCounts(t, "source", c.Collect(ctx, []Target{src.target()})[0], [][2]uint64{{10, 10}, {0, 0}})

	// The destination: started with -incoming, still loading.
	dst := startFakeQEMU(t, g, 1, testUUID, true)
	dst.setDriver(t, false)
	g.setIdx(0, 1015, 1005)
	out := c.Collect(ctx, []Target{src.target(), dst.target()})
	wantCounts(t, "source during the migration", out[0], [][2]uint64{{15, 15}, {0, 0}})
	if len(out[1].Queues) != 0 || !strings.Contains(out[1].Missing[SourceRings], "has not started the device") {
		t.Fatalf("destination while loading: queues %+v missing %v", out[1].Queues, out[1].Missing)
	}
	if out[0].Target.UUID != testUUID || out[1].Target.UUID != testUUID {
		t.Errorf("UUIDs %q %q, want %q", out[0].Target.UUID, out[1].Target.UUID, testUUID)
	}

	// The switchover: the source stopped at 1020, the destination ran on.
	dst.setDriver(t, true)
	g.setIdx(0, 1030, 1020)
	g.setIdx(1, 520, 520)
	// Read side by side (as Collect reads VMs), the source may still count
	// its own rings in the collection where the destination takes over,
	// never past the destination's counts; after it, it yields.
	out = c.Collect(ctx, []Target{src.target(), dst.target()})
	wantCounts(t, "destination at the switchover", out[1], [][2]uint64{{30, 30}, {20, 20}})
	for i, order := range [][2]int{{0, 1}, {1, 0}} {
		c.Sample()
		ts := []Target{src.target(), dst.target()}
		out = c.Collect(ctx, []Target{ts[order[0]], ts[order[1]]})
		s, d := out[order[0]], out[order[1]]
		wantCounts(t, "destination after the switchover", d, [][2]uint64{{30, 30}, {20, 20}})
		if len(s.Queues) != 0 || !strings.Contains(s.Missing[SourceRings], "NIC gone from this QEMU") {
			t.Fatalf("source after the switchover (%d): queues %+v missing %v", i, s.Queues, s.Missing)
		}
	}

	// The source quits and is no longer listed.
	src.stop()
	c.Forget(src.target())
	g.setIdx(0, 1100, 1090)
	c.Sample()
	wantCounts(t, "destination alone", c.Collect(ctx, []Target{dst.target()})[0], [][2]uint64{{100, 100}, {20, 20}})

	// Restarted: a QEMU that boots the guest itself, its rings from 0.
	dst.stop()
	c.Forget(dst.target())
	g.setIdx(0, 7, 3)
	g.setIdx(1, 2, 2)
	again := startFakeQEMU(t, g, 1, testUUID, false)
	wantCounts(t, "restarted", c.Collect(ctx, []Target{again.target()})[0], [][2]uint64{{107, 103}, {22, 22}})
}

// TestCollectMigrationAfterSourceForgotten: the source is gone and
// forgotten before the destination is first read (the exporter scraped
// between the source's release and the destination's start): the
// destination goes on with the VM's counts for Options.KeepFor, and
// starts from 0 after it.
func TestCollectMigrationAfterSourceForgotten(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  [][2]uint64
	}{
		{"within KeepFor", time.Minute, [][2]uint64{{40, 40}, {0, 0}}},
		{"after KeepFor", 11 * time.Minute, [][2]uint64{{0, 0}, {0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			c := NewCollector(Options{Deadline: 10 * time.Second, Now: func() time.Time { return now }})
			g := newFakeGuest(t)
			g.setIdx(0, 1000, 990)
			g.setIdx(1, 500, 500)
			src := startFakeQEMU(t, g, 1, testUUID, false)
			wantCounts(t, "source", c.Collect(ctx, []Target{src.target()})[0], [][2]uint64{{0, 0}, {0, 0}})
			src.stop()
			c.Forget(src.target())
			now = now.Add(tc.after)
			g.setIdx(0, 1040, 1030)
			dst := startFakeQEMU(t, g, 1, testUUID, true)
			wantCounts(t, "destination", c.Collect(ctx, []Target{dst.target()})[0], tc.want)
		})
	}
}

// TestCollectMigrationWithoutUUID: QEMU's default UUID (all zero) is no
// identity: a new QEMU process's rings are its own, counted from its
// first read (the counts of the old one are not carried over).
func TestCollectMigrationWithoutUUID(t *testing.T) {
	ctx := context.Background()
	g := newFakeGuest(t)
	g.setIdx(0, 1000, 990)
	g.setIdx(1, 500, 500)
	src := startFakeQEMU(t, g, 1, "", false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	c.Collect(ctx, []Target{src.target()})
	g.setIdx(0, 1010, 1000)
	wantCounts(t, "source", c.Collect(ctx, []Target{src.target()})[0], [][2]uint64{{10, 10}, {0, 0}})
	dst := startFakeQEMU(t, g, 1, "", true)
	g.setIdx(0, 1030, 1020)
	out := c.Collect(ctx, []Target{src.target(), dst.target()})
	wantCounts(t, "source", out[0], [][2]uint64{{30, 30}, {0, 0}})
	wantCounts(t, "destination", out[1], [][2]uint64{{0, 0}, {0, 0}})
	if out[1].Target.UUID != "" {
		t.Errorf("UUID %q, want none", out[1].Target.UUID)
	}
}

// TestCollectFillsUUID: Collect names each NIC's VM by QEMU's
// query-uuid (lower case), asked once per QEMU process; the nil UUID is
// none.
func TestCollectFillsUUID(t *testing.T) {
	for _, tc := range []struct{ answer, want string }{
		{"6F1C2A7E-58D4-4F4E-9B0A-0C8E2D1F3A42", testUUID},
		{"", ""},
	} {
		f := newFakeVM(t, 1, false)
		f.mu.Lock()
		f.uuid = tc.answer
		f.mu.Unlock()
		c := NewCollector(Options{Deadline: 10 * time.Second})
		for i := 0; i < 2; i++ {
			if s := c.Collect(context.Background(), []Target{fakeTarget(f, "userspace")})[0]; s.Target.UUID != tc.want {
				t.Errorf("QEMU's UUID %q: Target.UUID %q, want %q", tc.answer, s.Target.UUID, tc.want)
			}
		}
	}
}

func TestParseQueryUUID(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		err       bool
	}{
		{`{"UUID": "6f1c2a7e-58d4-4f4e-9b0a-0c8e2d1f3a42"}`, testUUID, false},
		{`{"UUID": "6F1C2A7E-58D4-4F4E-9B0A-0C8E2D1F3A42"}`, testUUID, false},
		{`{"UUID": "00000000-0000-0000-0000-000000000000"}`, "", false},
		{`{"UUID": "6f1c2a7e58d44f4e9b0a0c8e2d1f3a42"}`, "", true},
		{`{"UUID": "6f1c2a7e-58d4-4f4e-9b0a-0c8e2d1f3a4g"}`, "", true},
		{`{"UUID": "` + strings.Repeat("a", 4096) + `"}`, "", true},
		{`[]`, "", true},
	} {
		got, err := parseQueryUUID([]byte(tc.raw))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%.60s: %q, %v; want %q, error %v", tc.raw, got, err, tc.want, tc.err)
		}
	}
}

// TestCollectReattachUnderUUIDIsReset: a NIC detached and attached again
// under the same id in the same QEMU (netctl's record has another
// attach time) while the exporter forgot it in between: the VM's counts
// go on, and the new device's rings, set up from 0 by the guest's driver
// (here at the same guest pages), are counted from 0 on top, not from the
// old rings' last indices.
func TestCollectReattachUnderUUIDIsReset(t *testing.T) {
	ctx := context.Background()
	f := newFakeVM(t, 1, false)
	f.mu.Lock()
	f.uuid = testUUID
	f.mu.Unlock()
	c := NewCollector(Options{Deadline: 10 * time.Second})
	old := fakeTarget(f, "userspace")
	old.Attached = time.Unix(100, 0)
	f.setIdx(0, 1000, 990)
	f.setIdx(1, 20, 20)
	c.Collect(ctx, []Target{old})
	f.setIdx(0, 1010, 1000)
	wantCounts(t, "before", c.Collect(ctx, []Target{old})[0], [][2]uint64{{10, 10}, {0, 0}})
	c.Forget(old)
	again := old
	again.Attached = time.Unix(200, 0)
	f.setIdx(0, 1500, 1500)
	f.setIdx(1, 3, 3)
	wantCounts(t, "attached again", c.Collect(ctx, []Target{again})[0], [][2]uint64{{1510, 1510}, {3, 3}})
	// And without a Forget in between (a caller that does not forget).
	third := again
	third.Attached = time.Unix(300, 0)
	f.setIdx(0, 4, 4)
	f.setIdx(1, 1, 1)
	wantCounts(t, "attached a third time", c.Collect(ctx, []Target{third})[0], [][2]uint64{{1514, 1514}, {4, 4}})
}
