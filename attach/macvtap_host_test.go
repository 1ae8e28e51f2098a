package attach

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestHostAttachMacvtapOnVeth: attach --macvtap on one end of a veth pair
// to a real QEMU 7.2 (q35, native hotplug): netctl creates the macvtap
// (2 queues, the guest's MAC), QEMU gets its queues; detach unplugs and
// deletes the macvtap netctl created, and leaves the veth alone. A failed
// attach (a property QEMU refuses) deletes the macvtap it made.
func TestHostAttachMacvtapOnVeth(t *testing.T) {
	testenv.Host(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nvlow0"}, PeerName: "nvlow1"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	testenv.LinkUp(t, "nvlow0")
	sock, _ := qemutest.StartPaused(t, "mvvm", "-machine", "q35", "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
		"-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fds := testenv.OpenFDs(t)

	if _, err := Attach(ctx, Request{QMP: sock, ID: "bad", Macvtap: "nvlow0", StateDir: dir,
		ExtraProps: map[string]any{"bus": "rp1", "rx_queue_size": 3}}); err == nil {
		t.Fatal("attach with rx_queue_size=3 succeeded")
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after a failed attach: %v", l)
	}

	nic, err := Attach(ctx, Request{QMP: sock, ID: "mv1", Macvtap: "nvlow0:bridge", Queues: 2, MAC: "52:54:00:00:0a:01", StateDir: dir, Bus: "rp1"})
	if err != nil {
		t.Fatal(err)
	}
	if nic.Macvtap == nil || !nic.Macvtap.Created || nic.Macvtap.Lower != "nvlow0" {
		t.Fatalf("record %+v", nic)
	}
	l, err := netlink.LinkByName(nic.Macvtap.Name)
	if err != nil {
		t.Fatalf("the macvtap %s: %v", nic.Macvtap.Name, err)
	}
	if l.Type() != "macvtap" || l.Attrs().HardwareAddr.String() != "52:54:00:00:0a:01" {
		t.Errorf("link %s is a %s with address %s", l.Attrs().Name, l.Type(), l.Attrs().HardwareAddr)
	}
	if got := qemuHolds(t, sock); !strings.Contains(got, "client netctl-mv1") || !strings.Contains(got, "device mv1") {
		t.Errorf("QEMU holds %q", got)
	}
	if err := Detach(ctx, DetachRequest{QMP: sock, ID: "mv1", StateDir: dir, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if l := netctlLinks(t); len(l) != 0 {
		t.Errorf("links after detach: %v", l)
	}
	if _, err := netlink.LinkByName("nvlow0"); err != nil {
		t.Errorf("the lower veth after detach: %v", err)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open, %d before", n, fds)
	}
	if got := qemuHolds(t, sock); got != "device rp1" {
		t.Errorf("QEMU after detach holds %q", got)
	}
}
