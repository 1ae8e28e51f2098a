package stats

import (
	"context"
	"testing"
	"time"
)

// TestCollectClonesWithOneUUID: two VMs cloned with the same UUID run on
// one host under their own -name: each counts its own rings, from its
// own first read; neither takes the other's counts nor yields to it.
func TestCollectClonesWithOneUUID(t *testing.T) {
	ctx := context.Background()
	g1, g2 := newFakeGuest(t), newFakeGuest(t)
	g1.setIdx(0, 1000, 990)
	g2.setIdx(0, 50, 50)
	a := startFakeQEMU(t, g1, 1, testUUID, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	ta := a.target()
	c.Collect(ctx, []Target{ta})
	g1.setIdx(0, 1010, 1000)
	wantCounts(t, "first clone", c.Collect(ctx, []Target{ta})[0], [][2]uint64{{10, 10}, {0, 0}})
	b := startFakeQEMU(t, g2, 1, testUUID, false)
	tb := b.target()
	tb.VM = "fake-clone"
	out := c.Collect(ctx, []Target{ta, tb})
	wantCounts(t, "first clone beside the second", out[0], [][2]uint64{{10, 10}, {0, 0}})
	wantCounts(t, "second clone's first read", out[1], [][2]uint64{{0, 0}, {0, 0}})
	g1.setIdx(0, 1020, 1010)
	g2.setIdx(0, 55, 55)
	c.Sample()
	out = c.Collect(ctx, []Target{tb, ta})
	wantCounts(t, "second clone", out[0], [][2]uint64{{5, 5}, {0, 0}})
	wantCounts(t, "first clone", out[1], [][2]uint64{{20, 20}, {0, 0}})
	b.stop()
	c.Forget(tb)
	g1.setIdx(0, 1030, 1020)
	c.Sample()
	wantCounts(t, "first clone after the second quit", c.Collect(ctx, []Target{ta})[0], [][2]uint64{{30, 30}, {0, 0}})
}

// TestCollectMigrationToAnotherName: netctl migrate incoming on one host
// needs the destination under another -name (netctl keeps NICs per VM
// name), so a same-host migration's destination has the VM's UUID under
// another name: it goes on with the VM's counts all the same.
func TestCollectMigrationToAnotherName(t *testing.T) {
	ctx := context.Background()
	g := newFakeGuest(t)
	g.setIdx(0, 1000, 990)
	src := startFakeQEMU(t, g, 1, testUUID, false)
	c := NewCollector(Options{Deadline: 10 * time.Second})
	ts := src.target()
	c.Collect(ctx, []Target{ts})
	g.setIdx(0, 1010, 1000)
	wantCounts(t, "source", c.Collect(ctx, []Target{ts})[0], [][2]uint64{{10, 10}, {0, 0}})
	dst := startFakeQEMU(t, g, 1, testUUID, true)
	td := dst.target()
	td.VM = "fake-dst"
	g.setIdx(0, 1030, 1020)
	c.Sample()
	out := c.Collect(ctx, []Target{ts, td})
	wantCounts(t, "destination", out[1], [][2]uint64{{30, 30}, {0, 0}})
	c.Sample()
	out = c.Collect(ctx, []Target{ts, td})
	if len(out[0].Queues) != 0 {
		t.Errorf("the source still counts after the destination took over: %+v", out[0].Queues)
	}
}
