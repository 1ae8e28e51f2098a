package stats

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
)

// testMigration: a VM with a UUID (-uuid) moves to another QEMU process
// on this host, the way QEMU migrates: firmware-only QEMUs (iPXE does
// DHCP on a vhost-net NIC QEMU opened itself, net0, no server answering)
// with the same -uuid, -name and NIC. The source migrates into a file
// (migrate "exec:cat > FILE") and quits; the destination, started with
// -incoming "exec:cat FILE" on a tap of its own, loads it (the guest's
// rings with their indices). The ring counts never go back: at the
// destination's first read they are exactly the source's last (the
// indices carried over are the same), not 0 (a new process) nor the
// source's plus the raw indices (a reset counted twice), and they grow
// from there with the raw indices. Then the VM restarts: a third QEMU of
// the same UUID boots iPXE itself (no -incoming): a reset, the counts go
// on from the destination's last plus the new rings' indices.
func testMigration(t *testing.T, k *testenv.Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const uuid = "5d0d6f58-4b9e-4c55-8f8e-2a61b2d4c7e1"
	state := l2.Run + "/stmig.state" // in QEMU's chroot
	qemu := func(name, tap string, extra ...string) *l2.Guest {
		t.Helper()
		args := append([]string{"-name", "stmig", "-uuid", uuid,
			"-netdev", "tap,id=hn0,ifname=" + tap + ",script=no,downscript=no,vhost=on",
			"-device", "virtio-net-pci,netdev=hn0,id=net0,mac=52:54:00:96:00:02"}, extra...)
		g, err := l2.StartFirmware(ctx, l2.Firmware{Name: name, Extra: args})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	target := func(g *l2.Guest) Target {
		t.Helper()
		ts, err := Targets(ctx, t.TempDir(), "", g.QMP)
		if err != nil || len(ts) != 1 || ts[0].NIC != "net0" || ts[0].PID != g.PID {
			t.Fatalf("targets %+v: %v", ts, err)
		}
		return ts[0]
	}
	run := func(g *l2.Guest, cmd string, args any) json.RawMessage {
		t.Helper()
		qc, err := qmp.Dial(ctx, g.QMP)
		if err != nil {
			t.Fatal(err)
		}
		defer qc.Close()
		raw, err := qc.Execute(ctx, cmd, args)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return raw
	}
	waitMigrated := func(g *l2.Guest) {
		t.Helper()
		for {
			var st struct {
				Status string `json:"status"`
			}
			json.Unmarshal(run(g, "query-migrate", nil), &st)
			switch st.Status {
			case "completed":
				return
			case "failed", "cancelled":
				t.Fatalf("migration %s:\n%s", st.Status, g.Stderr())
			}
			if ctx.Err() != nil {
				t.Fatalf("migration not done: %q", st.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	c := NewCollector(Options{Deadline: 30 * time.Second})
	read := func(when string, tg Target) NICStats {
		t.Helper()
		s := c.Collect(ctx, []Target{tg})[0]
		if len(s.Queues) != 2 {
			t.Fatalf("%s: queues %+v missing %v", when, s.Queues, s.Missing)
		}
		if s.Target.UUID != uuid {
			t.Errorf("%s: UUID %q, want %q", when, s.Target.UUID, uuid)
		}
		t.Logf("kernel %s, %s: queues %+v", k.Name, when, s.Queues)
		return s
	}
	// notBack fails when any count of s is below prev's.
	notBack := func(when string, prev, s NICStats) {
		t.Helper()
		for i, q := range s.Queues {
			if p := prev.Queues[i]; q.Offered < p.Offered || q.Completed < p.Completed {
				t.Errorf("%s: queue %d/%s went back: %+v after %+v", when, q.Pair, q.Direction, q, p)
			}
		}
	}

	src := qemu("stmiga", "stmiga")
	tgA := target(src)
	run(src, "cont", nil)
	// iPXE's first DHCPDISCOVER: its TX ring has moved.
	var a NICStats
	for ctx.Err() == nil {
		if a = c.Collect(ctx, []Target{tgA})[0]; len(a.Queues) == 2 && a.Queues[1].UsedIdx > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	a = read("source running", tgA)
	run(src, "migrate", map[string]string{"uri": "exec:cat > " + state})
	waitMigrated(src)
	last := read("source migrated", tgA) // paused: what the destination gets
	notBack("source migrated", a, last)
	src.Close()
	c.Forget(tgA) // as the exporter does once the source is no longer listed

	dst := qemu("stmigb", "stmigb", "-incoming", "exec:cat "+state)
	waitMigrated(dst)
	tgB := target(dst)
	b := read("destination loaded", tgB)
	for i, q := range b.Queues {
		p := last.Queues[i]
		if q.AvailIdx != p.AvailIdx || q.UsedIdx != p.UsedIdx {
			t.Errorf("queue %d/%s: the destination's indices %d/%d are not the source's %d/%d: the rings did not come over",
				q.Pair, q.Direction, q.AvailIdx, q.UsedIdx, p.AvailIdx, p.UsedIdx)
		}
		if q.Offered != p.Offered || q.Completed != p.Completed {
			t.Errorf("queue %d/%s: the destination counts %d/%d, the source's last %d/%d: want them to go on (0 is a restart, more counts the carried indices twice)",
				q.Pair, q.Direction, q.Offered, q.Completed, p.Offered, p.Completed)
		}
	}
	run(dst, "cont", nil)
	time.Sleep(3 * time.Second) // iPXE goes on sending
	b2 := read("destination running", tgB)
	notBack("destination running", b, b2)
	if tx, tx0 := b2.Queues[1], b.Queues[1]; tx.UsedIdx-tx0.UsedIdx != uint16(tx.Completed-tx0.Completed) {
		t.Errorf("destination TX: raw used %d -> %d, counted %d -> %d", tx0.UsedIdx, tx.UsedIdx, tx0.Completed, tx.Completed)
	}
	dst.Close()
	c.Forget(tgB)

	// The VM restarted: a QEMU that boots the guest itself.
	again := qemu("stmigc", "stmigc")
	tgC := target(again)
	run(again, "cont", nil)
	var r NICStats
	for ctx.Err() == nil {
		if r = c.Collect(ctx, []Target{tgC})[0]; len(r.Queues) == 2 && r.Queues[1].UsedIdx > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r = read("restarted", tgC)
	notBack("restarted", b2, r)
	for i, q := range r.Queues {
		// Its rings from 0: what they did is counted on top of the
		// destination's last counts, nothing more.
		if p := b2.Queues[i]; q.Offered-p.Offered != uint64(q.AvailIdx) || q.Completed-p.Completed != uint64(q.UsedIdx) {
			t.Errorf("restarted: queue %d/%s counts %d/%d after %d/%d, its raw indices %d/%d: want the new rings counted from 0 on top",
				q.Pair, q.Direction, q.Offered, q.Completed, p.Offered, p.Completed, q.AvailIdx, q.UsedIdx)
		}
	}
}
