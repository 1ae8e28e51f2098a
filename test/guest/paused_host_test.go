package guest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostHotplugPaused hotplugs a NIC into a QEMU started with -S (no
// guest code has run yet), then cont: the guest finds the NIC at boot
// (coldplugged, no hotplug event needed), pings cross, and the NIC
// unplugs like any other.
func TestHostHotplugPaused(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlgp0", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	HostAddr(t, "nctlgp0", "10.78.0.1/24")

	g, err := Boot(ctx, Options{Paused: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := dialQMP(ctx, t, g)
	defer c.Close()
	var st struct {
		Running bool
		Status  string
	}
	if err := c.Run(ctx, "query-status", nil, &st); err != nil || st.Running || st.Status != "prelaunch" {
		t.Fatalf("query-status of a -S QEMU: %+v, %v; want prelaunch, not running", st, err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x78, 0x00, 0x02}
	hotplug(ctx, t, c, "net1", []int{tap.FD()}, mac, "")
	t0 := time.Now()
	if err := c.Run(ctx, "cont", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	since(t, "cont to agent ready", t0)
	ifname, ok, err := g.HasNIC(ctx, mac)
	if err != nil || !ok {
		t.Fatalf("the NIC added before cont is not in the guest at boot: %q %v %v", ifname, ok, err)
	}
	if err := g.SetAddr(ctx, ifname, "10.78.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx, "10.78.0.1", 3); err != nil {
		t.Fatal(err)
	}
	HostPing(t, "10.78.0.2", 3)
	assertQEMUHolds(ctx, t, c, "net1")
	took := unplug(ctx, t, c, "net1")
	t.Logf("timing: device_del to DEVICE_DELETED: %v", took.Round(time.Millisecond))
	if err := g.WaitNICGone(ctx, mac); err != nil {
		t.Fatal(err)
	}
	assertQEMUClean(ctx, t, c, "net1", 1)
}
