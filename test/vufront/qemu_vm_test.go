package vufront

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/vhostuser"
)

// qemuFrontendDHCP: QEMU as the frontend. A nested, firmware-only QEMU
// (SeaBIOS + iPXE, run through chroot /host) has one virtio-net NIC on
// -netdev vhost-user to the bridge, which serves it onto kernel vhost-net
// over a tap; iPXE's DHCP crosses the bridge's data path to the tap
// (DISCOVER), the test's DHCP server answers (OFFER), and iPXE's REQUEST
// for the offer proves the answer crossed back. QEMU reports DRIVER_OK and
// vhost started.
func qemuFrontendDHCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	if err := l2.Chroot(); err != nil {
		t.Fatal(err)
	}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vuq%d", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	os.WriteFile("/proc/sys/net/ipv6/conf/"+tap.Name()+"/disable_ipv6", []byte("1"), 0)
	testenv.LinkUp(t, tap.Name())
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x15}
	srv, err := l2.ServeDHCP(tap.Name(), mac)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srvStart := time.Now() // srv's event times count from about here
	offl, err := tapOffloads()
	if err != nil {
		t.Fatal(err)
	}
	sock := l2.Run + "/vu-dhcp.sock" // as QEMU sees it in the chroot
	b, err := vhostuser.NewBridge(vhostuser.Config{Socket: l2.Root + sock, Backend: tap, Offloads: offl})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(bctx) }()
	defer func() {
		bcancel()
		if err := <-served; err != nil {
			t.Errorf("bridge Serve: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("bridge Close: %v", err)
		}
	}()

	t0 := time.Now()
	g, err := l2.StartFirmware(ctx, l2.Firmware{Name: "vu", SharedMemory: true, Extra: QEMUNIC("net1", sock, 1, mac)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("QEMU stderr: %s", g.Stderr())
		}
	}()
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("QEMU up (handshake with the bridge done) %.1f s after start", time.Since(t0).Seconds())
	tc := time.Now()
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	d, err := srv.Wait(ctx, l2.DHCPDiscover)
	if err != nil {
		t.Fatalf("guest to host through the bridge: %v", err)
	}
	r, err := srv.Wait(ctx, l2.DHCPRequest)
	if err != nil {
		t.Fatalf("host to guest through the bridge: the OFFER was sent, but %v (log %v)", err, srv.Log())
	}
	t.Logf("DHCPDISCOVER %.1f s after cont, DHCPREQUEST %.1f s (xid %#x), through vhost-user and kernel vhost-net",
		(d.At - tc.Sub(srvStart)).Seconds(), (r.At - tc.Sub(srvStart)).Seconds(), r.XID)
	st, err := l2.QueryVirtioStatus(ctx, c, "net1")
	if err != nil {
		t.Fatal(err)
	}
	if !st.DriverOK() || !st.VhostStarted {
		t.Errorf("QEMU: DRIVER_OK %v, vhost started %v; want both (%s)", st.DriverOK(), st.VhostStarted, st.Raw)
	}
	if st.Vhost != nil {
		t.Logf("QEMU's vhost-dev: nvqs %d, acked %v", st.Vhost.NVQs, st.Vhost.AckedFeatures.Names())
	}
}
