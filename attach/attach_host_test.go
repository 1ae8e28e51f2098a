package attach

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/qemutest"
)

// qemuHolds reads what QEMU has that attach could have left
// (qemutest.State): the network clients, the device ids, the fdsets, and
// which of names QEMU still knows (closefd succeeds only for a name it
// holds, and then drops it, so this is the last look).
func qemuHolds(t *testing.T, sock string, names ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := qemutest.ReadState(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var l []string
	for _, id := range s.Clients() {
		l = append(l, "client "+id)
	}
	for _, id := range s.Devices {
		l = append(l, "device "+id)
	}
	for range s.FDSets {
		l = append(l, "fdset")
	}
	for _, n := range names {
		if err := c.Run(ctx, "closefd", map[string]string{"fdname": n}, nil); err == nil {
			l = append(l, "fd name "+n)
		}
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

func netctlLinks(t *testing.T) []string {
	t.Helper()
	ls, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, l := range ls {
		if strings.HasPrefix(l.Attrs().Name, "nctl") {
			n = append(n, l.Attrs().Name)
		}
	}
	return n
}

// TestHostAttachRealQEMU attaches on the userspace path (this host has no
// vhost-net) to a real, paused QEMU 7.2 with the real probe, tap and QMP;
// QEMU has the netdev and the device, list shows it; then a device_add
// that QEMU refuses rolls everything back.
func TestHostAttachRealQEMU(t *testing.T) {
	testenv.Host(t)
	sock, _ := qemutest.StartPaused(t, "hostvm")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fds := testenv.OpenFDs(t)
	nic, err := Attach(ctx, Request{QMP: sock, ID: "net1", Queues: 2, MAC: "52:54:00:aa:bb:01", MTU: 9000, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attached: backend %s, tap %+v, fds %v, props %v, steps %+v", nic.Backend, nic.Tap, nic.FDNames, nic.Properties, nic.Steps)
	if nic.Backend != "userspace" || nic.VM != "hostvm" || nic.Tap == nil || !nic.Tap.Created || nic.QEMUVersion == "" {
		t.Errorf("record %+v", nic)
	}
	if got := qemuHolds(t, sock); !strings.Contains(got, "client netctl-net1") || !strings.Contains(got, "device net1") || strings.Contains(got, "fdset") {
		t.Errorf("QEMU holds %q, want the netdev and the device", got)
	}
	if l := netctlLinks(t); len(l) != 1 || l[0] != nic.Tap.Name {
		t.Errorf("links %v, want the tap %s", l, nic.Tap.Name)
	}
	if l, err := netlink.LinkByName(nic.Tap.Name); err != nil || l.Attrs().MTU != 9000 || l.Attrs().HardwareAddr.String() != "fe:54:00:aa:bb:01" {
		t.Errorf("tap %s: %+v, %v: want MTU 9000 and fe:54:00:aa:bb:01", nic.Tap.Name, l, err)
	}
	c := dialT(t, sock)
	var mtu int
	if err := c.Run(ctx, "qom-get", map[string]string{"path": "/machine/peripheral/net1", "property": "host_mtu"}, &mtu); err != nil || mtu != 9000 {
		t.Errorf("QEMU's host_mtu: %d, %v", mtu, err)
	}
	c.Close()
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after attach, %d before: netctl's copies must be closed", n, fds)
	}
	ls, bad, err := list(ctx, ListRequest{StateDir: dir, VMName: "hostvm"})
	if err != nil || len(bad) != 0 || len(ls) != 1 || ls[0].Present != "yes" {
		t.Errorf("list: %+v %v %v", ls, bad, err)
	}

	// A value QEMU refuses: device_add fails after getfd and netdev_add.
	before := qemuHolds(t, sock)
	_, err = Attach(ctx, Request{QMP: sock, ID: "net2", StateDir: dir, ExtraProps: map[string]any{"rx_queue_size": 3}})
	if err == nil || !strings.Contains(err.Error(), "device_add") {
		t.Fatalf("attach with rx_queue_size=3: %v", err)
	}
	t.Logf("refused: %v", err)
	if got := qemuHolds(t, sock, "netctl-net2-tap0"); got != before {
		t.Errorf("QEMU after the rollback holds %q, before %q", got, before)
	}
	if l := netctlLinks(t); len(l) != 1 {
		t.Errorf("links after the rollback %v", l)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the rollback, %d before", n, fds)
	}
	if r := records(t, dir); len(r) != 1 {
		t.Errorf("records after the rollback: %v", r)
	}

	// A monitor held by another client (as libvirt holds its domains'):
	// refused after monitorWait, saying so; nothing changes.
	held := dialT(t, sock)
	old := monitorWait
	monitorWait = time.Second
	_, err = Attach(ctx, Request{QMP: sock, ID: "net3", StateDir: dir})
	monitorWait = old
	held.Close()
	if err == nil || !strings.Contains(err.Error(), "another client holds this QMP monitor") {
		t.Errorf("attach while another client holds the monitor: %v", err)
	}
	t.Logf("held monitor: %v", err)

	// An id in use: nothing changes.
	if _, err := Attach(ctx, Request{QMP: sock, ID: "net1", StateDir: dir}); !errors.Is(err, ErrConflict) {
		t.Errorf("attach over net1 again: %v", err)
	}
	if got := qemuHolds(t, sock); got != before {
		t.Errorf("QEMU after a refused id holds %q, before %q", got, before)
	}
}

func dialT(t *testing.T, sock string) *qmp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
