package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/attach"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
	"github.com/netctl/netctl/test/guest"
	"github.com/netctl/netctl/test/qemutest"
)

// The end-to-end attach tests: netctl attach, diagnose, list and detach,
// run through the app as a user runs them, against a real QEMU 7.2 (TCG)
// booting Debian's 6.12 kernel (test/guest) on this host. This host has no
// vhost-net, so the NIC lands on QEMU's userspace virtio-net and the
// fallback chain says why.

// TestHostAttachGuestMultiqueue: a 4-queue NIC on an existing persistent
// multiqueue tap (the host's address on it) in a 4-vCPU guest.
func TestHostAttachGuestMultiqueue(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlat0", VnetHdr: true, Queues: 4, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tap.Close() // netctl opens it by name; the namespace takes it away at the end
	guest.HostAddr(t, "nctlat0", "10.81.0.1/24")
	attachEndToEnd(t, e2e{
		boot:   guest.Options{SMP: 4},
		args:   []string{"--tap", "nctlat0", "--queues", "4"},
		queues: 4, mac: "52:54:00:81:00:02", guestIP: "10.81.0.2/24", hostIP: "10.81.0.1",
		link: "nctlat0",
	})
	if _, err := netlink.LinkByName("nctlat0"); err != nil {
		t.Errorf("netctl detach deleted the tap it only opened: %v", err)
	}
}

// TestHostAttachGuestMacvtap: netctl creates a 2-queue macvtap on one end
// of a veth pair whose peer holds the host's address; detach deletes it.
func TestHostAttachGuestMacvtap(t *testing.T) {
	testenv.Host(t)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nctlav0"}, PeerName: "nctlav1"}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	testenv.LinkUp(t, "nctlav0")
	guest.HostAddr(t, "nctlav1", "10.82.0.1/24")
	attachEndToEnd(t, e2e{
		boot:   guest.Options{SMP: 2},
		args:   []string{"--macvtap", "nctlav0:bridge", "--queues", "2"},
		queues: 2, mac: "52:54:00:82:00:02", guestIP: "10.82.0.2/24", hostIP: "10.82.0.1",
	})
}

// TestHostAttachGuestPaused: attach to a QEMU started with -S (prelaunch),
// then cont: the guest finds the NIC when it boots.
func TestHostAttachGuestPaused(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlap0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tap.Close()
	guest.HostAddr(t, "nctlap0", "10.83.0.1/24")
	attachEndToEnd(t, e2e{
		boot:   guest.Options{Paused: true},
		args:   []string{"--tap", "nctlap0"},
		queues: 1, mac: "52:54:00:83:00:02", guestIP: "10.83.0.2/24", hostIP: "10.83.0.1",
		link: "nctlap0",
	})
}

// e2e is one end-to-end case.
type e2e struct {
	boot            guest.Options
	args            []string // the backend's flags for netctl attach
	queues          int
	mac             string
	guestIP, hostIP string // the guest's CIDR, the host's address
	link            string // an existing link netctl must leave in place
}

// attachEndToEnd boots the guest, runs netctl attach, checks the guest
// got the NIC (hotplugged, or present at boot when paused) with its
// queues, pings both ways, holds netctl diagnose against the guest's own
// feature word and netctl list against QEMU, runs netctl detach (which
// waits for DEVICE_DELETED), and checks that nothing is left: in QEMU (no
// device, netdev, fdset or fd name), on the host (the same links and open
// fds as before attach) and in the state directory.
func attachEndToEnd(t *testing.T, c e2e) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	runDir := t.TempDir()
	t.Setenv("NETCTL_RUN_DIR", runDir)
	t.Setenv("TMPDIR", t.TempDir())
	g, err := guest.Boot(ctx, c.boot)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()
	sock := g.QMP()
	linksBefore, fdsBefore := linkNames(t), openFDs(t)
	before := qemutest.Read(ctx, t, sock)

	t0 := time.Now()
	var nic state.NIC
	out := run(t, append([]string{"attach", "--qmp", sock, "--id", "net1", "--mac", c.mac, "--json"}, c.args...)...)
	if err := json.Unmarshal([]byte(out), &nic); err != nil {
		t.Fatalf("attach --json: %v\n%s", err, out)
	}
	t.Logf("timing: netctl attach: %v", time.Since(t0).Round(time.Millisecond))
	if nic.Backend != "userspace" || nic.Queues != c.queues || nic.MAC != c.mac || nic.Status != state.StatusAttached {
		t.Errorf("attached: backend %q, %d queues, mac %s, status %s", nic.Backend, nic.Queues, nic.MAC, nic.Status)
	}
	// The chain says why vhost-net was skipped here.
	if line := chainLine(nic.Steps); !strings.Contains(line, "vhost-net: ") || !strings.HasSuffix(line, ")") {
		t.Errorf("fallback chain %q does not say why vhost-net was skipped", line)
	}
	if s := qemutest.Read(ctx, t, sock); s.Holds("net1", nic.Netdev) != "device net1, netdev "+nic.Netdev {
		t.Errorf("after attach QEMU holds %q:\n%s", s.Holds("net1", nic.Netdev), s.Network)
	}

	mac, _ := net.ParseMAC(c.mac)
	if c.boot.Paused {
		if err := qmpRun(ctx, sock, "cont"); err != nil {
			t.Fatal(err)
		}
		if err := g.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := g.HasNIC(ctx, mac); err != nil || !ok {
			t.Fatalf("the NIC attached before cont is not in the guest when it boots: %v %v", ok, err)
		}
	}
	t0 = time.Now()
	ifname, err := g.WaitNIC(ctx, mac)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("timing: attach returned to the NIC in the guest: %v", time.Since(t0).Round(time.Millisecond))
	if rx, tx, err := g.Queues(ctx, ifname); err != nil || rx != c.queues || tx != c.queues {
		t.Errorf("guest %s: rx %d tx %d queues (%v), want %d each", ifname, rx, tx, err, c.queues)
	}
	if err := g.SetAddr(ctx, ifname, c.guestIP); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx, c.hostIP, 3); err != nil {
		t.Fatal(err)
	}
	guest.HostPing(t, strings.Split(c.guestIP, "/")[0], 3)

	// diagnose agrees with the guest's own driver.
	word, err := g.Features(ctx, ifname)
	if err != nil {
		t.Fatal(err)
	}
	var r diagnose.Report
	out = run(t, "diagnose", "--qmp", sock, "--id", "net1", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("diagnose --json: %v\n%s", err, out)
	}
	if want := "0x" + strconv.FormatUint(word, 16); r.Guest.Hex != want || r.NIC != "net1" {
		t.Errorf("diagnose: NIC %q, guest acknowledged %s; the guest's driver says %s", r.NIC, r.Guest.Hex, want)
	}
	for _, x := range r.Features {
		if x.Acked != (word&(1<<x.Bit) != 0) {
			t.Errorf("diagnose: %s acked=%v, the guest's driver disagrees", x.Feature, x.Acked)
		}
	}
	var listed []attach.Listed
	if err := json.Unmarshal([]byte(run(t, "list", "--json")), &listed); err != nil || len(listed) != 1 ||
		listed[0].ID != "net1" || listed[0].Present != "yes" {
		t.Errorf("list: %+v, %v", listed, err)
	}

	t0 = time.Now()
	if out := run(t, "detach", "--qmp", sock, "--id", "net1"); strings.TrimSpace(out) != "detached net1" {
		t.Errorf("detach printed %q", out)
	}
	t.Logf("timing: netctl detach (device_del to DEVICE_DELETED, netdev_del, cleanup): %v", time.Since(t0).Round(time.Millisecond))
	if _, ok, err := g.HasNIC(ctx, mac); err != nil || ok {
		t.Errorf("the guest still has the NIC after detach: %v %v", ok, err)
	}

	// Nothing left.
	after := qemutest.Read(ctx, t, sock)
	if left := after.Holds("net1", nic.Netdev); left != "" {
		t.Errorf("QEMU still holds %s:\n%s", left, after.Network)
	}
	if fmt.Sprint(after.Devices) != fmt.Sprint(before.Devices) || after.Network != before.Network {
		t.Errorf("QEMU before attach: %v\n%s\nafter detach: %v\n%s", before.Devices, before.Network, after.Devices, after.Network)
	}
	if l := linkNames(t); l != linksBefore {
		t.Errorf("links before attach: %s\nafter detach: %s", linksBefore, l)
	}
	if fds := openFDs(t); fds != fdsBefore {
		t.Errorf("fds open before attach: %s\nafter detach: %s", fdsBefore, fds)
	}
	// No record; the VM's lock file stays by design (state.Store.Lock).
	if es, err := os.ReadDir(filepath.Join(runDir, "nics")); err != nil || len(es) != 0 {
		t.Errorf("state directory after detach: nics/ holds %d entries (%v)", len(es), err)
	}
	if c.link != "" {
		if _, err := netlink.LinkByName(c.link); err != nil {
			t.Errorf("detach deleted %s, which netctl only opened: %v", c.link, err)
		}
	}
	if out := run(t, "list"); !strings.Contains(out, "no NICs attached by netctl") {
		t.Errorf("list after detach:\n%s", out)
	}
}

func qmpRun(ctx context.Context, sock, cmd string) error {
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run(ctx, cmd, nil, nil)
}

// linkNames lists the test namespace's links with their indexes.
func linkNames(t *testing.T) string {
	t.Helper()
	ls, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, fmt.Sprintf("%s#%d", l.Attrs().Name, l.Attrs().Index))
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// openFDs lists this process's open fds and what they are, leaving out
// the test harness's own files under the VM cache's runs/ (test/vm opens
// the guest's output log when the guest first writes to it, which for a
// paused guest is after cont).
func openFDs(t *testing.T) string {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range es {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || strings.Contains(target, "/runs/run-") {
			continue // the directory's own fd, closed by now; the harness's files
		}
		fds = append(fds, e.Name()+"->"+target)
	}
	sort.Strings(fds)
	return strings.Join(fds, " ")
}
