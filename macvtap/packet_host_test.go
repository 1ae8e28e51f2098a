package macvtap_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

func TestHostPacketSocketBackend(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlpk0")
	fds := testenv.OpenFDs(t)
	p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "nctlpk0", VnetHdrSize: 10, Promisc: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(p.FD(), unix.SOL_PACKET, unix.PACKET_VNET_HDR); err != nil || v != 1 {
		t.Errorf("PACKET_VNET_HDR %d, %v", v, err)
	}
	// This host's kernel has PACKET_VNET_HDR_SZ: the 12-byte header works.
	var b macvtap.Backend = p
	d, err := macvtap.ApplyGuestFeatures(b, virtio.Version1|virtio.NetGuestCsum|virtio.NetGuestTSO4)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(p.FD(), unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ); err != nil || v != 12 {
		t.Errorf("PACKET_VNET_HDR_SZ %d, %v", v, err)
	}
	if d.Offloads != macvtap.OffloadCSUM|macvtap.OffloadTSO4 || b.Kind() != macvtap.KindPacket || b.Lower() != "nctlpk0" {
		t.Errorf("decision %v, kind %s, lower %s", d.Offloads, b.Kind(), b.Lower())
	}
	p.Close()
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after Close, %d before", n, fds)
	}
	for _, c := range []struct {
		cfg  macvtap.PacketConfig
		want string
		is   error
	}{
		{macvtap.PacketConfig{Interface: "nosuch0"}, `interface "nosuch0" does not exist`, macvtap.ErrInvalid},
		{macvtap.PacketConfig{Interface: "nctlpk0", VnetHdrSize: 20}, "20-byte virtio-net header (HASH_REPORT) is not possible", macvtap.ErrNotSupported},
		{macvtap.PacketConfig{Interface: "nctlpk0", VnetHdrSize: 11}, "use 0, 10 or 12", macvtap.ErrInvalid},
	} {
		if _, err := macvtap.OpenPacketSocket(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.is) {
			t.Errorf("%+v: %v, want %q wrapping %v", c.cfg, err, c.want, c.is)
		}
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the refused opens, %d before", n, fds)
	}
	np, _ := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "nctlpk0"})
	defer np.Close()
	if err := np.SetOffloads(macvtap.OffloadCSUM); err == nil {
		t.Error("offloads without a virtio-net header were accepted")
	}
}

func TestHostApplyGuestFeaturesOnEveryBackend(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlab0")
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlab1", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlab2", Lower: "nctlab0", DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()
	acked := virtio.Version1 | virtio.NetMrgRxbuf | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 |
		virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	for _, b := range []macvtap.Backend{tap, mv} {
		d, err := macvtap.ApplyGuestFeatures(b, acked)
		if err != nil {
			t.Fatalf("%s: %v", b.Kind(), err)
		}
		want := macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6 | macvtap.OffloadUSO4 | macvtap.OffloadUSO6
		if d.Offloads != want || b.Offloads() != want || len(d.Dropped) != 0 {
			t.Errorf("%s: applied %v (now %v), dropped %v", b.Kind(), d.Offloads, b.Offloads(), d.Dropped)
		}
		f, err := macvtap.ReadFeatures(b.Name())
		if err != nil || !f.Active["tx-udp-segmentation"] {
			t.Errorf("%s: USO not on in %s's features: %v", b.Kind(), b.Name(), err)
		}
	}
	if n, _ := mv.VnetHdrSize(); n != 12 {
		t.Errorf("macvtap header size %d after VERSION_1, want 12", n)
	}
}
