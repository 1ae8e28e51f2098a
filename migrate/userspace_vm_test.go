package migrate_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/diagnose/gather"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/qmp"
	testpool "github.com/netctl/netctl/test/pool"
	"github.com/netctl/netctl/virtio"
)

// TestVMMigrateUserspaceToVhostNet: a guest whose NIC runs on QEMU's
// userspace virtio-net (a host that fell back) negotiates RING_RESET,
// which 6.1's vhost-net does not carry. Moving it to a destination where
// netctl decides vhost-net: on 6.1 netctl migrate incoming refuses before
// anything is created, naming the bit; forcing the destination's NIC in
// anyway (attach without the source's requirements), the migration
// fails the way it fails in the field, at its very end, with QEMU's
// "Features 0x... unsupported", and the source keeps the guest. With the
// pool's plan pinned on the source NIC (re-attached with it, the guest
// negotiating again), the same migration succeeds onto vhost-net and the
// guest answers pings through it. On 6.12 (whose vhost-net carries
// RING_RESET) the unpinned migration succeeds.
func TestVMMigrateUserspaceToVhostNet(t *testing.T) {
	testenv.Require(t, "vhost_net", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := probe.ProbeFor(probe.Parts{QEMU: true})
	if err != nil {
		t.Fatal(err)
	}
	vdec, err := policy.Decide(res, policy.Request{Backend: policy.BackendVhostNet})
	if err != nil {
		t.Fatal(err)
	}
	vhostRR := vdec.Offer.Has(virtio.RingReset)
	t.Logf("this kernel's vhost-net offers RING_RESET: %v", vhostRR)

	r := newRig(ctx, t)
	src := r.boot("usrc", false)
	nic, err := attach.Attach(ctx, attach.Request{QMP: src.QMP, ID: "net1", Backend: "userspace", MAC: guestMAC, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	enslave(t, nic.Tap.Name, r.br)
	if _, err := src.WaitNICs(ctx, 1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	p := r.ping()
	p.answeredAfter(t, -11, 60*time.Second)
	m, err := migrate.Export(ctx, migrate.ExportRequest{QMP: src.QMP, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.NICs[0].Negotiated, "RING_RESET") {
		t.Fatalf("the guest did not negotiate RING_RESET on QEMU's userspace virtio-net: %v", m.NICs[0].Negotiated)
	}
	// netctl diagnose --plan on the real QEMU says so.
	if pc := poolCheck(ctx, t, src.QMP); !slices.Contains(pc.Acked, "RING_RESET") || !strings.Contains(pc.Verdict, "not migratable within the pool") {
		t.Errorf("diagnose --plan of the unpinned NIC: %+v", pc)
	}

	dst := r.boot("udst", true)
	dnics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: dst.QMP, Manifest: m, StateDir: r.dir})
	if vhostRR {
		// 6.12: vhost-net carries all the guest negotiated.
		if err != nil || len(dnics) != 1 || dnics[0].Backend != "vhost-net" {
			t.Fatalf("incoming onto vhost-net with RING_RESET: %+v %v", dnics, err)
		}
		enslave(t, dnics[0].Tap.Name, r.br)
		mig := r.migrateUnix(src, dst)
		if mig.Status != "completed" {
			t.Fatalf("migration %s: %s", mig.Status, mig.ErrorDesc)
		}
		p.answeredAfter(t, lastReply(p.out.String()), 60*time.Second)
		if s := status(ctx, t, dst, "net1"); !s.VhostStarted {
			t.Errorf("destination NIC not vhost-started: %+v", s)
		}
		return
	}
	// 6.1: refused, nothing created, the bit named.
	if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "RING_RESET") || len(dnics) != 0 {
		t.Fatalf("incoming onto 6.1's vhost-net: %+v %v, want a refusal naming RING_RESET", dnics, err)
	}
	t.Logf("netctl migrate incoming refused: %v", err)
	if ls, _ := attach.List(ctx, attach.ListRequest{StateDir: r.dir}); len(ls) != 1 {
		t.Errorf("records after the refusal: %+v (want only the source's)", ls)
	}
	// The field's failure: a destination NIC on vhost-net without the pin.
	forced, err := attach.Attach(ctx, attach.Request{QMP: dst.QMP, ID: "net1", Backend: "vhost-net", MAC: guestMAC, Addr: m.NICs[0].Addr, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	enslave(t, forced.Tap.Name, r.br)
	mig := r.migrateUnix(src, dst)
	// The destination loads what the source sent after the source says
	// completed: wait for its verdict, then stop it.
	for end := time.Now().Add(90 * time.Second); !strings.Contains(dst.Stderr(), "load of migration failed") && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
	}
	dst.Close()
	// The source sent everything (completed, paused); the destination
	// refused the guest's features after the whole memory was copied.
	if !regexp.MustCompile(`Features 0x[0-9a-f]+ unsupported`).MatchString(dst.Stderr()) {
		t.Fatalf("unpinned migration onto 6.1's vhost-net: %s (%s); destination stderr:\n%s", mig.Status, mig.ErrorDesc, dst.Stderr())
	}
	t.Logf("unpinned: the source says %s (%s); the destination QEMU:\n%s", mig.Status, mig.ErrorDesc, dst.Stderr())
	// The source keeps the guest: netctl migrate finish will not quit it
	// without --quit, and cont resumes it (what libvirt does).
	if _, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src.QMP, StateDir: r.dir}); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("finish on the source after the destination failed: %v, want a refusal", err)
	}
	if c, err := qmp.Dial(ctx, src.QMP); err != nil {
		t.Fatal(err)
	} else {
		if err := c.Run(ctx, "cont", nil, nil); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	sc := status(ctx, t, src, "net1")
	if !sc.VMRunning {
		t.Fatalf("the source does not run after cont: %+v", sc)
	}
	p.answeredAfter(t, lastReply(p.out.String()), 60*time.Second)
	if _, err := attach.GC(ctx, attach.GCRequest{StateDir: r.dir}); err != nil {
		t.Fatal(err)
	}

	// Pinned: the source NIC again, with the pool's plan.
	if err := attach.Detach(ctx, attach.DetachRequest{QMP: src.QMP, ID: "net1", StateDir: r.dir}); err != nil {
		t.Fatal(err)
	}
	pool := testpool.VMKernels(t)
	nic, err = attach.Attach(ctx, attach.Request{QMP: src.QMP, ID: "net1", Backend: "userspace", MAC: guestMAC, StateDir: r.dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Properties["queue_reset"] != "off" {
		t.Fatalf("pinned NIC properties %v", nic.Properties)
	}
	enslave(t, nic.Tap.Name, r.br)
	p.answeredAfter(t, lastReply(p.out.String()), 3*time.Minute)
	m, err = migrate.Export(ctx, migrate.ExportRequest{QMP: src.QMP, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(m.NICs[0].Negotiated, "RING_RESET") || m.NICs[0].Pool != pool.ID {
		t.Fatalf("pinned manifest %+v", m.NICs[0])
	}
	if pc := poolCheck(ctx, t, src.QMP); len(pc.Acked) != 0 || len(pc.Offered) != 0 || !strings.Contains(pc.Verdict, "within plan") {
		t.Errorf("diagnose --plan of the pinned NIC: %+v", pc)
	}
	dst2 := r.boot("udst2", true)
	dnics, err = migrate.Incoming(ctx, migrate.IncomingRequest{QMP: dst2.QMP, Manifest: m, StateDir: r.dir, Pool: pool})
	if err != nil || len(dnics) != 1 || dnics[0].Backend != "vhost-net" {
		t.Fatalf("pinned incoming: %+v %v", dnics, err)
	}
	enslave(t, dnics[0].Tap.Name, r.br)
	mig = r.migrateUnix(src, dst2)
	if mig.Status != "completed" {
		t.Fatalf("pinned migration %s: %s", mig.Status, mig.ErrorDesc)
	}
	p.answeredAfter(t, lastReply(p.out.String()), 60*time.Second)
	if s := status(ctx, t, dst2, "net1"); !s.VhostStarted || !s.DriverOK() {
		t.Errorf("destination NIC after the pinned migration: %+v", s)
	}
	sent, got := p.stop(t)
	t.Logf("pinned migration: downtime %d ms; pings over the whole test %d sent, %d answered", mig.Downtime, sent, got)
}

// poolCheck is what netctl diagnose --plan (the VMs' plan) says of the
// VM's NIC net1.
func poolCheck(ctx context.Context, t *testing.T, sock string) *diagnose.PoolCheck {
	t.Helper()
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap, err := gather.Gather(ctx, c, gather.Options{ID: "net1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := diagnose.Explain(snap)
	if err != nil {
		t.Fatal(err)
	}
	r.CheckPool(testpool.VMKernels(t))
	return r.Pool
}
