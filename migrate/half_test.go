package migrate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
	testpool "github.com/netctl/netctl/test/pool"
)

// TestMigrateHalfProcess is one VM's half of TestHostMigrateAcrossKernels
// (NETCTL_MIGRATE_HALF source or destination; NETCTL_MIGRATE_SHARE the
// directory both VMs reach, as L1 sees it; QEMU, chrooted in /host, sees
// it without the /host prefix).
func TestMigrateHalfProcess(t *testing.T) {
	half, share := os.Getenv("NETCTL_MIGRATE_HALF"), os.Getenv("NETCTL_MIGRATE_SHARE")
	if half == "" {
		t.Skip("runs only as a half of TestHostMigrateAcrossKernels, in a VM")
	}
	testenv.Require(t, "vhost_net", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r := newRig(ctx, t)
	qshare := strings.TrimPrefix(share, l2.Root) // the share as QEMU sees it
	for _, run := range []string{"unpinned", "pinned"} {
		if err := os.MkdirAll(filepath.Join(share, run), 0o777); err != nil {
			t.Fatal(err)
		}
		if half == "source" {
			migrateOut(ctx, t, r, run, filepath.Join(share, run), filepath.Join(qshare, run))
		} else {
			migrateIn(ctx, t, r, run, filepath.Join(share, run), filepath.Join(qshare, run))
		}
	}
}

// migrateOut boots a guest with a netctl vhost-net NIC (pinned with the
// VMs' plan, or not), exports it and migrates it into dir/stream.
func migrateOut(ctx context.Context, t *testing.T, r *rig, run, dir, qdir string) {
	src := r.boot("x"+run, false)
	req := attach.Request{QMP: src.QMP, ID: "net1", Backend: "vhost-net", MAC: guestMAC, StateDir: r.dir}
	if run == "pinned" {
		req.Pool = testpool.VMKernels(t)
	}
	nic, err := attach.Attach(ctx, req)
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
	rr := slices.Contains(m.NICs[0].Negotiated, "RING_RESET")
	if rr != (run == "unpinned") {
		t.Fatalf("%s: the guest negotiated %v on 6.12", run, m.NICs[0].Negotiated)
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "nics.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := qmp.Dial(ctx, src.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(ctx, "migrate", map[string]string{"uri": "exec:cat > " + qdir + "/stream"}, nil); err != nil {
		t.Fatal(err)
	}
	var mig migrationResult
	for end := time.Now().Add(4 * time.Minute); mig.Status != "completed"; {
		if err := c.Run(ctx, "query-migrate", nil, &mig); err != nil {
			t.Fatal(err)
		}
		if mig.Status == "failed" || time.Now().After(end) {
			t.Fatalf("%s: migrate to a file: %+v", run, mig)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s: migrated to %s/stream: %d bytes of RAM; the guest negotiated %v", run, dir, mig.RAM.Transferred, m.NICs[0].Negotiated)
	p.stop(t)
}

// migrateIn takes a guest from dir on this (6.1) kernel.
func migrateIn(ctx context.Context, t *testing.T, r *rig, run, dir, qdir string) {
	b, err := os.ReadFile(filepath.Join(dir, "nics.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	dst := r.boot("y"+run, true)
	req := migrate.IncomingRequest{QMP: dst.QMP, Manifest: m, StateDir: r.dir}
	if run == "pinned" {
		req.Pool = testpool.VMKernels(t)
	}
	nics, err := migrate.Incoming(ctx, req)
	if run == "unpinned" {
		if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "RING_RESET") || len(nics) != 0 {
			t.Fatalf("unpinned incoming on 6.1: %+v %v, want a refusal naming RING_RESET", nics, err)
		}
		t.Logf("unpinned: netctl migrate incoming refused: %v", err)
		// Forced in, the field's failure: after the whole stream.
		forced, err := attach.Attach(ctx, attach.Request{QMP: dst.QMP, ID: "net1", Backend: "vhost-net", MAC: guestMAC, Addr: m.NICs[0].Addr, StateDir: r.dir})
		if err != nil {
			t.Fatal(err)
		}
		enslave(t, forced.Tap.Name, r.br)
	} else {
		if err != nil || len(nics) != 1 || nics[0].Backend != "vhost-net" {
			t.Fatalf("pinned incoming on 6.1: %+v %v", nics, err)
		}
		enslave(t, nics[0].Tap.Name, r.br)
	}
	c, err := qmp.Dial(ctx, dst.QMP)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx, "migrate-incoming", map[string]string{"uri": "exec:cat " + qdir + "/stream"}, nil); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Status string `json:"status"`
	}
	for end := time.Now().Add(4 * time.Minute); st.Status != "running"; {
		if err := c.Run(ctx, "query-status", nil, &st); err != nil {
			break // QEMU exited: the load failed
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Close()
	if run == "unpinned" {
		for end := time.Now().Add(60 * time.Second); !strings.Contains(dst.Stderr(), "load of migration failed") && time.Now().Before(end); {
			time.Sleep(200 * time.Millisecond)
		}
		if st.Status == "running" || !regexp.MustCompile(`Features 0x[0-9a-f]+ unsupported`).MatchString(dst.Stderr()) {
			t.Fatalf("unpinned migration 6.12 -> 6.1: %s; destination QEMU:\n%s", st.Status, dst.Stderr())
		}
		t.Logf("unpinned: QEMU on 6.1, after the whole stream:\n%s", dst.Stderr())
		dst.Close()
		if _, err := attach.GC(ctx, attach.GCRequest{StateDir: r.dir}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if st.Status != "running" {
		t.Fatalf("pinned migration 6.12 -> 6.1: %s; destination QEMU:\n%s", st.Status, dst.Stderr())
	}
	if f, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: dst.QMP, StateDir: r.dir}); err != nil || f.Side != "destination" {
		t.Fatalf("finish: %+v %v", f, err)
	}
	p := r.ping()
	p.answeredAfter(t, 10, 90*time.Second) // 20 answered in a row: the NIC works, not one lucky packet
	s := status(ctx, t, dst, "net1")
	if !s.VhostStarted || !s.DriverOK() || slices.Contains(s.Guest.Transports, "VIRTIO_F_RING_RESET") {
		t.Errorf("the NIC on 6.1 after the migration: %+v", s)
	}
	sent, got := p.stop(t)
	t.Logf("pinned: the guest from 6.12 answers on 6.1's vhost-net (%d of %d pings)", got, sent)
}
