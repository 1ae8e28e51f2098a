package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/migrate"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/l2"
)

// syncBuf is a bytes.Buffer ping writes to while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var replySeq = regexp.MustCompile(`seq=(\d+)`)

// lastReply is the highest seq answered so far.
func lastReply(out string) int {
	last := -1
	for _, m := range replySeq.FindAllStringSubmatch(out, -1) {
		if n, _ := strconv.Atoi(m[1]); n > last {
			last = n
		}
	}
	return last
}

func waitConsole(ctx context.Context, t *testing.T, g *l2.Guest, what string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for !strings.Contains(g.Console(), what) {
		if time.Now().After(end) || ctx.Err() != nil {
			t.Fatalf("no %q on the L2 console after %s:\n%s\nstderr: %s", what, d, g.Console(), g.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func enslave(t *testing.T, tap string, br netlink.Link) {
	t.Helper()
	l, err := netlink.LinkByName(tap)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

func guestWord(s *l2.VirtioStatus) []string {
	w := slices.Concat(s.Guest.Dev, s.Guest.Transports)
	slices.Sort(w)
	return w
}

// rig is one L1's migration test bench: a bridge with 10.77.0.1 that the
// NICs' taps join, and a state directory.
type rig struct {
	t       *testing.T
	ctx     context.Context
	vmlinuz string
	dir     string
	br      netlink.Link
}

const guestMAC = "52:54:00:22:00:02"

func newRig(ctx context.Context, t *testing.T) *rig {
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec")
	}
	if err := l2.LoadKVM(); err != nil {
		t.Fatal(err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "migbr0"}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(br) })
	addr, _ := netlink.ParseAddr("10.77.0.1/24")
	if err := netlink.AddrAdd(br, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, ctx: ctx, vmlinuz: vmlinuz, dir: t.TempDir(), br: br}
}

// boot starts an L2 QEMU (nested KVM) called name; incoming starts it
// with -incoming defer. It is closed (and its output logged on failure)
// when the test ends.
func (r *rig) boot(name string, incoming bool) *l2.Guest {
	t := r.t
	cfg := l2.Config{Vmlinuz: r.vmlinuz, Accel: "kvm", Name: name, IP: guestMAC + "@10.77.0.2/24"}
	if incoming {
		cfg.Incoming = "defer"
	}
	g, err := l2.Start(r.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s stderr:\n%s\nconsole:\n%s", name, g.Stderr(), g.Console())
		}
		g.Close()
	})
	if !incoming {
		waitConsole(r.ctx, t, g, "L2-INIT", 5*time.Minute)
	}
	return g
}

// pinger is a ping from L1 to the guest, running until stop.
type pinger struct {
	cmd *exec.Cmd
	out syncBuf
}

func (r *rig) ping() *pinger {
	p := &pinger{cmd: exec.Command("/bin/busybox", "ping", "-i", "0.1", "10.77.0.2")}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// answeredAfter waits until a ping later than seq+10 is answered.
func (p *pinger) answeredAfter(t *testing.T, seq int, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); lastReply(p.out.String()) <= seq+10; {
		if time.Now().After(end) {
			t.Fatalf("no ping answered after seq %d:\n%s", seq, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the ping and returns how many were sent and answered.
func (p *pinger) stop(t *testing.T) (sent, got int) {
	p.cmd.Process.Signal(syscall.SIGINT)
	p.cmd.Wait()
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`).FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("no ping summary:\n%s", p.out.String())
	}
	sent, _ = strconv.Atoi(m[1])
	got, _ = strconv.Atoi(m[2])
	return sent, got
}

// status is the NIC's x-query-virtio-status (the connection is closed
// again: QEMU serves one monitor connection, and netctl needs it).
func status(ctx context.Context, t *testing.T, g *l2.Guest, id string) *l2.VirtioStatus {
	t.Helper()
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l2.QueryVirtioStatus(ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// migrationResult is query-migrate's answer on the source.
type migrationResult struct {
	Status    string `json:"status"`
	Downtime  int64  `json:"downtime"`
	TotalTime int64  `json:"total-time"`
	ErrorDesc string `json:"error-desc"`
	RAM       struct {
		Transferred int64 `json:"transferred"`
	} `json:"ram"`
}

// migrateUnix runs migrate-incoming on dst and migrate on src over a unix
// socket, and waits for the source's migration to end.
func (r *rig) migrateUnix(src, dst *l2.Guest) migrationResult {
	t, ctx := r.t, r.ctx
	uri := "unix:" + l2.Run + "/mig.sock"
	dc, err := qmp.Dial(ctx, dst.QMP)
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.Run(ctx, "migrate-incoming", map[string]string{"uri": uri}, nil); err != nil {
		t.Fatal(err)
	}
	dc.Close()
	sc, err := qmp.Dial(ctx, src.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Run(ctx, "migrate", map[string]string{"uri": uri}, nil); err != nil {
		t.Fatal(err)
	}
	var mig migrationResult
	for end := time.Now().Add(4 * time.Minute); ; {
		if err := sc.Run(ctx, "query-migrate", nil, &mig); err != nil {
			t.Fatal(err)
		}
		if mig.Status == "completed" || mig.Status == "failed" || mig.Status == "cancelled" || time.Now().After(end) {
			return mig
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestVMMigrateVhostNet: a Linux L2 guest (nested KVM) with a netctl
// vhost-net NIC migrates between two QEMUs over a unix socket, the NIC
// moved by netctl migrate export / incoming / finish; a ping from L1
// through the NIC runs across the migration and goes on answering (the
// lost packets are counted and logged); the destination's NIC is
// vhost-started with the feature word the guest negotiated on the source;
// the source left no record, tap or process.
func TestVMMigrateVhostNet(t *testing.T) {
	testenv.Require(t, "vhost_net", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	r := newRig(ctx, t)
	src := r.boot("src", false)
	nic, err := attach.Attach(ctx, attach.Request{QMP: src.QMP, ID: "net1", Backend: "vhost-net", MAC: guestMAC, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	srcTap := nic.Tap.Name
	enslave(t, srcTap, r.br)
	if _, err := src.WaitNICs(ctx, 1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	p := r.ping()
	p.answeredAfter(t, -11, 60*time.Second)
	before := status(ctx, t, src, "net1")
	if !before.VhostStarted {
		t.Fatalf("source NIC before the migration: %+v", before)
	}

	m, err := migrate.Export(ctx, migrate.ExportRequest{QMP: src.QMP, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest: %+v", m.NICs)
	if len(m.NICs) != 1 || m.NICs[0].Addr == "" || len(m.NICs[0].Negotiated) == 0 {
		t.Fatalf("manifest %+v", m)
	}
	dst := r.boot("dst", true)
	dnics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: dst.QMP, Manifest: m, StateDir: r.dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(dnics) != 1 || dnics[0].Backend != "vhost-net" || dnics[0].Tap == nil || dnics[0].Properties["addr"] != m.NICs[0].Addr {
		t.Fatalf("incoming NICs %+v", dnics)
	}
	enslave(t, dnics[0].Tap.Name, r.br)

	seqAtStart := lastReply(p.out.String())
	mig := r.migrateUnix(src, dst)
	if mig.Status != "completed" {
		t.Fatalf("migration %s: %s", mig.Status, mig.ErrorDesc)
	}
	seqAtSwitch := lastReply(p.out.String())
	t.Logf("migrated: downtime %d ms, total %d ms, %d bytes of RAM", mig.Downtime, mig.TotalTime, mig.RAM.Transferred)

	f, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: dst.QMP, StateDir: r.dir})
	if err != nil || f.Side != "destination" || !slices.Equal(f.Announced, []string{"net1"}) {
		t.Fatalf("finish on the destination: %+v %v", f, err)
	}
	if _, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src.QMP, StateDir: r.dir}); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "--quit") {
		t.Errorf("finish on the source without --quit: %v, want a refusal", err)
	}
	fs, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src.QMP, StateDir: r.dir, Quit: true})
	if err != nil || fs.Side != "source" || !slices.Equal(fs.Removed, []string{"net1"}) {
		t.Fatalf("finish on the source: %+v %v", fs, err)
	}

	// The ping goes on through the destination's NIC.
	p.answeredAfter(t, seqAtSwitch, 60*time.Second)
	sent, got := p.stop(t)
	t.Logf("ping across the migration: %d sent, %d answered (lost %d), seq %d at migrate, %d at switchover", sent, got, sent-got, seqAtStart, seqAtSwitch)

	after := status(ctx, t, dst, "net1")
	if !after.VhostStarted || !after.DriverOK() {
		t.Fatalf("destination NIC: %+v", after)
	}
	if a, b := guestWord(after), guestWord(before); !slices.Equal(a, b) {
		t.Errorf("the guest's features changed across the migration: %v, were %v", a, b)
	}

	// The source left nothing: no record, no tap, no QEMU.
	store, _ := state.Open(r.dir)
	recs, _, _ := store.List(state.KeyFor("", src.QMP))
	if len(recs) != 0 {
		t.Errorf("source records left: %+v", recs)
	}
	if _, err := net.InterfaceByName(srcTap); err == nil {
		t.Errorf("source tap %s is still there", srcTap)
	}
	if ls, err := attach.List(ctx, attach.ListRequest{StateDir: r.dir}); err != nil || len(ls) != 1 || ls[0].QMP != dst.QMP || ls[0].Present != "yes" {
		t.Errorf("netctl list after the migration: %v %+v", err, ls)
	}
}
