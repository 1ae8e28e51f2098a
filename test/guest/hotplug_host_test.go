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

// TestHostHotplugTapMultiqueue hotplugs a 4-queue tap NIC into a running
// guest with raw QMP (getfd per queue, netdev_add tap fds=... vhost=off,
// device_add virtio-net-pci mq=on vectors=10): the guest sees it with 4
// queue pairs, pings cross both ways, device_del (sent twice) ends in DEVICE_DELETED,
// the NIC leaves the guest, and QEMU keeps nothing of it.
func TestHostHotplugTapMultiqueue(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const queues = 4
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlg0", VnetHdr: true, Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	HostAddr(t, "nctlg0", "10.77.0.1/24")

	// One vCPU per queue pair: the guest's driver turns on
	// min(queue pairs, online CPUs) of them.
	g, err := Boot(ctx, Options{SMP: queues})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t.Logf("timing: boot (QEMU start to agent ready, %d vCPUs): %v", queues, g.BootTime().Round(time.Millisecond))
	c := dialQMP(ctx, t, g)
	defer c.Close()

	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, 0x02}
	var fds []int
	for i := 0; i < queues; i++ {
		fds = append(fds, tap.QueueFD(i))
	}
	t0 := time.Now()
	hotplug(ctx, t, c, "net1", fds, mac, "")
	ifname, err := g.WaitNIC(ctx, mac)
	if err != nil {
		t.Fatal(err)
	}
	since(t, "device_add to the NIC in the guest", t0)
	rx, tx, err := g.Queues(ctx, ifname)
	if err != nil || rx != queues || tx != queues {
		t.Errorf("guest %s queues: rx %d tx %d (%v), want %d each", ifname, rx, tx, err, queues)
	}
	word, err := g.Features(ctx, ifname)
	if err != nil {
		t.Fatal(err)
	}
	const mq = 1 << 22 // VIRTIO_NET_F_MQ
	if word&mq == 0 {
		t.Errorf("guest acknowledged %#x: no MQ", word)
	}
	t.Logf("guest %s acknowledged %#x", ifname, word)
	if err := g.SetAddr(ctx, ifname, "10.77.0.2/24"); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, err := g.Ping(ctx, "10.77.0.1", 3); err != nil {
		t.Fatal(err)
	}
	since(t, "3 pings guest to host (the first resolves ARP)", t0)
	t0 = time.Now()
	HostPing(t, "10.77.0.2", 3)
	since(t, "3 pings host to guest", t0)

	assertQEMUHolds(ctx, t, c, "net1")
	t0 = time.Now()
	// On pc (PIIX4 ACPI hotplug) QEMU 7.2 takes a repeated device_del
	// without an error, and the unplug ends once.
	took, early, _ := unplugRepeating(ctx, t, c, "net1")
	t.Logf("timing: device_del to DEVICE_DELETED: %v", took.Round(time.Millisecond))
	if early != "" {
		t.Errorf("device_del repeated at once on pc: %q, want it accepted", early)
	}
	if err := g.WaitNICGone(ctx, mac); err != nil {
		t.Fatal(err)
	}
	since(t, "device_del to the NIC gone from the guest, netdev deleted", t0)
	assertQEMUClean(ctx, t, c, "net1", queues)
	tap.Close()
	if _, err := netlink.LinkByName("nctlg0"); err == nil {
		t.Error("the tap outlived its last fd: QEMU still holds a queue")
	}
}
