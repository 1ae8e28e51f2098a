package guest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostHotplugMacvtapOnVeth hotplugs a 2-queue macvtap that sits on one
// end of a veth pair; the other end holds the host's address. The
// macvtap's queue fds go to QEMU the same way as a tap's: pings cross both
// ways through the veth, and after the unplug QEMU keeps nothing and the
// macvtap goes with Close.
func TestHostHotplugMacvtapOnVeth(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nctlgv0"}, PeerName: "nctlgv1"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	testenv.LinkUp(t, "nctlgv0")
	HostAddr(t, "nctlgv1", "10.79.0.1/24")
	const queues = 2
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x79, 0x00, 0x02}
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlgm0", Lower: "nctlgv0", Mode: macvtap.ModeBridge, MAC: mac, Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()

	g, err := Boot(ctx, Options{SMP: queues})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := dialQMP(ctx, t, g)
	defer c.Close()
	// The guest's NIC has the macvtap's MAC: macvtap delivers only frames
	// addressed to its own MAC (and broadcasts).
	hotplug(ctx, t, c, "net1", []int{mv.QueueFD(0), mv.QueueFD(1)}, mac, "")
	t0 := time.Now()
	ifname, err := g.WaitNIC(ctx, mac)
	if err != nil {
		t.Fatal(err)
	}
	since(t, "device_add to the NIC in the guest", t0)
	if rx, tx, err := g.Queues(ctx, ifname); err != nil || rx != queues || tx != queues {
		t.Errorf("guest %s queues: rx %d tx %d (%v), want %d each", ifname, rx, tx, err, queues)
	}
	if err := g.SetAddr(ctx, ifname, "10.79.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx, "10.79.0.1", 3); err != nil {
		t.Fatal(err)
	}
	HostPing(t, "10.79.0.2", 3)
	assertQEMUHolds(ctx, t, c, "net1")
	took := unplug(ctx, t, c, "net1")
	t.Logf("timing: device_del to DEVICE_DELETED: %v", took.Round(time.Millisecond))
	if err := g.WaitNICGone(ctx, mac); err != nil {
		t.Fatal(err)
	}
	assertQEMUClean(ctx, t, c, "net1", queues)
	if err := mv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("nctlgm0"); err == nil {
		t.Error("the macvtap is still there after Close")
	}
}
