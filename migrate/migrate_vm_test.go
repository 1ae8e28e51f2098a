package migrate_test

import (
	"bytes"
	"context"
	"fmt"
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

// TestVMMigrateVhostNet: a Linux L2 guest (nested KVM) with a netctl
// vhost-net NIC migrates between two QEMUs over a unix socket, the NIC
// moved by netctl migrate export / incoming / finish; a ping from L1
// through the NIC runs across the migration and goes on answering (the
// lost packets are counted and logged); the destination's NIC is
// vhost-started with the feature word the guest negotiated on the source;
// the source left no record, tap or process.
func TestVMMigrateVhostNet(t *testing.T) {
	testenv.Require(t, "vhost_net", nil)
	vmlinuz := os.Getenv("NETCTL_VM_VMLINUZ")
	if vmlinuz == "" {
		t.Fatal("NETCTL_VM_VMLINUZ is not set: run this test through netctl-vm exec")
	}
	if err := l2.LoadKVM(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const mac = "52:54:00:22:00:02"
	ipArg := mac + "@10.77.0.2/24"

	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "migbr0"}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	defer netlink.LinkDel(br)
	addr, _ := netlink.ParseAddr("10.77.0.1/24")
	if err := netlink.AddrAdd(br, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}

	src, err := l2.Start(ctx, l2.Config{Vmlinuz: vmlinuz, Accel: "kvm", Name: "src", IP: ipArg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("source stderr:\n%s\nconsole:\n%s", src.Stderr(), src.Console())
		}
		src.Close()
	}()
	waitConsole(ctx, t, src, "L2-INIT", 5*time.Minute)
	nic, err := attach.Attach(ctx, attach.Request{QMP: src.QMP, ID: "net1", Backend: "vhost-net", MAC: mac, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srcTap := nic.Tap.Name
	enslave(t, srcTap, br)
	if _, err := src.WaitNICs(ctx, 1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	var out syncBuf
	ping := exec.Command("/bin/busybox", "ping", "-i", "0.1", "10.77.0.2")
	ping.Stdout, ping.Stderr = &out, &out
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	defer ping.Process.Kill()
	for end := time.Now().Add(60 * time.Second); lastReply(out.String()) < 0; {
		if time.Now().After(end) {
			t.Fatalf("the guest answers no ping through the netctl NIC:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	sc, err := qmp.Dial(ctx, src.QMP)
	if err != nil {
		t.Fatal(err)
	}
	before, err := l2.QueryVirtioStatus(ctx, sc, "net1")
	sc.Close()
	if err != nil || !before.VhostStarted {
		t.Fatalf("source NIC before the migration: %+v %v", before, err)
	}

	m, err := migrate.Export(ctx, migrate.ExportRequest{QMP: src.QMP, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest: %+v", m.NICs)
	if len(m.NICs) != 1 || m.NICs[0].Addr == "" || len(m.NICs[0].Negotiated) == 0 {
		t.Fatalf("manifest %+v", m)
	}

	dst, err := l2.Start(ctx, l2.Config{Vmlinuz: vmlinuz, Accel: "kvm", Name: "dst", IP: ipArg, Incoming: "defer"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("destination stderr:\n%s\nconsole:\n%s", dst.Stderr(), dst.Console())
		}
		dst.Close()
	}()
	dnics, err := migrate.Incoming(ctx, migrate.IncomingRequest{QMP: dst.QMP, Manifest: m, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(dnics) != 1 || dnics[0].Backend != "vhost-net" || dnics[0].Tap == nil || dnics[0].Properties["addr"] != m.NICs[0].Addr {
		t.Fatalf("incoming NICs %+v", dnics)
	}
	enslave(t, dnics[0].Tap.Name, br)

	dc, err := qmp.Dial(ctx, dst.QMP)
	if err != nil {
		t.Fatal(err)
	}
	uri := "unix:" + l2.Run + "/mig.sock"
	if err := dc.Run(ctx, "migrate-incoming", map[string]string{"uri": uri}, nil); err != nil {
		t.Fatal(err)
	}
	dc.Close()
	sc, err = qmp.Dial(ctx, src.QMP)
	if err != nil {
		t.Fatal(err)
	}
	seqAtStart := lastReply(out.String())
	if err := sc.Run(ctx, "migrate", map[string]string{"uri": uri}, nil); err != nil {
		t.Fatal(err)
	}
	var mig struct {
		Status    string                      `json:"status"`
		Downtime  int64                       `json:"downtime"`
		TotalTime int64                       `json:"total-time"`
		ErrorDesc string                      `json:"error-desc"`
		RAM       struct{ Transferred int64 } `json:"ram"`
	}
	for end := time.Now().Add(4 * time.Minute); ; {
		if err := sc.Run(ctx, "query-migrate", nil, &mig); err != nil {
			t.Fatal(err)
		}
		if mig.Status == "completed" || mig.Status == "failed" || mig.Status == "cancelled" || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sc.Close()
	if mig.Status != "completed" {
		t.Fatalf("migration %s: %s", mig.Status, mig.ErrorDesc)
	}
	seqAtSwitch := lastReply(out.String())
	t.Logf("migrated: downtime %d ms, total %d ms, %d bytes of RAM", mig.Downtime, mig.TotalTime, mig.RAM.Transferred)

	f, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: dst.QMP, StateDir: dir})
	if err != nil || f.Side != "destination" || !slices.Equal(f.Announced, []string{"net1"}) {
		t.Fatalf("finish on the destination: %+v %v", f, err)
	}
	fs, err := migrate.Finish(ctx, migrate.FinishRequest{QMP: src.QMP, StateDir: dir})
	if err != nil || fs.Side != "source" || !slices.Equal(fs.Removed, []string{"net1"}) {
		t.Fatalf("finish on the source: %+v %v", fs, err)
	}

	// The ping goes on through the destination's NIC.
	for end := time.Now().Add(60 * time.Second); lastReply(out.String()) <= seqAtSwitch+10; {
		if time.Now().After(end) {
			t.Fatalf("no ping answered after the migration (last before: seq %d):\n%s", seqAtSwitch, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ping.Process.Signal(syscall.SIGINT)
	ping.Wait()
	summary := regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`).FindStringSubmatch(out.String())
	if summary == nil {
		t.Fatalf("no ping summary:\n%s", out.String())
	}
	sent, got := summary[1], summary[2]
	t.Logf("ping across the migration: %s sent, %s answered (lost %s), seq %d at migrate, %d at switchover", sent, got, diff(sent, got), seqAtStart, seqAtSwitch)

	dc, err = qmp.Dial(ctx, dst.QMP)
	if err != nil {
		t.Fatal(err)
	}
	after, err := l2.QueryVirtioStatus(ctx, dc, "net1")
	dc.Close() // QEMU serves one monitor connection: netctl list's check below needs it
	if err != nil || !after.VhostStarted || !after.DriverOK() {
		t.Fatalf("destination NIC: %+v %v", after, err)
	}
	if a, b := guestWord(after), guestWord(before); !slices.Equal(a, b) {
		t.Errorf("the guest's features changed across the migration: %v, were %v", a, b)
	}

	// The source left nothing: no record, no tap, no QEMU.
	store, _ := state.Open(dir)
	recs, _, _ := store.List(state.KeyFor("", src.QMP))
	if len(recs) != 0 {
		t.Errorf("source records left: %+v", recs)
	}
	if _, err := net.InterfaceByName(srcTap); err == nil {
		t.Errorf("source tap %s is still there", srcTap)
	}
	if ls, err := attach.List(ctx, attach.ListRequest{StateDir: dir}); err != nil || len(ls) != 1 || ls[0].QMP != dst.QMP || ls[0].Present != "yes" {
		t.Errorf("netctl list after the migration: %v %+v", err, ls)
	}
}

func diff(a, b string) string {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return fmt.Sprint(x - y)
}
