package l2

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/qmp"
)

// TestHostFirmwareDHCP: the host's QEMU, paused and firmware-only, gets a
// virtio-net NIC on a tap whose fd is passed over QMP (the userspace data
// path: this host has no vhost-net); after cont, iPXE's DHCP crosses the
// tap both ways (DISCOVER, OFFER, REQUEST) and QEMU reports DRIVER_OK.
func TestHostFirmwareDHCP(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x01}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "fwtap0", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	testenv.LinkUp(t, "fwtap0")
	srv, err := ServeDHCP("fwtap0", mac)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	g, err := StartFirmware(ctx, Firmware{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("QEMU: %s\nserial: %s", g.Stderr(), g.Console())
		}
	}()
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hotplug(ctx, t, c, rawNIC{ID: "net1", MAC: mac, TapFDs: []int{tap.QueueFD(0)}})
	t0 := time.Now()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	checkDHCP(ctx, t, srv, 60*time.Second)
	t.Logf("DHCPREQUEST %.1f s after cont", time.Since(t0).Seconds())
	st, err := waitStatus(ctx, t, c, "net1", 10*time.Second, (*VirtioStatus).DriverOK)
	if err != nil {
		t.Fatal(err)
	}
	if st.VhostStarted || st.Vhost != nil {
		t.Errorf("userspace path, yet QEMU reports vhost: started %v, vhost-dev %+v", st.VhostStarted, st.Vhost)
	}
	writeFrames(t, srv)
}

// checkDHCP waits for the exchange: a DISCOVER from the NIC (guest to
// host), the OFFER sent, and a REQUEST for the offer (which proves the
// OFFER crossed host to guest).
func checkDHCP(ctx context.Context, t *testing.T, srv *DHCPServer, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := srv.Wait(ctx, DHCPDiscover)
	if err != nil {
		t.Fatalf("guest to host: %v", err)
	}
	r, err := srv.Wait(ctx, DHCPRequest)
	if err != nil {
		t.Fatalf("host to guest: the DHCPOFFER sent, but %v (log %v)", err, srv.Log())
	}
	t.Logf("DISCOVER at %v, REQUEST at %v (xid %#x)", d.At.Round(time.Millisecond), r.At.Round(time.Millisecond), r.XID)
}

// writeFrames keeps the real frames as fuzz seeds when
// NETCTL_DHCP_SAMPLES names a directory.
func writeFrames(t *testing.T, srv *DHCPServer) {
	dir := os.Getenv("NETCTL_DHCP_SAMPLES")
	if dir == "" {
		return
	}
	for _, e := range srv.Log() {
		os.WriteFile(filepath.Join(dir, e.Type.String()+".bin"), e.Frame, 0o644)
	}
}
