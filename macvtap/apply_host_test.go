package macvtap_test

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

// TestHostApplyGuestFeaturesRefusedChangesNothing: the kernel refuses the
// offloads of a macvtap whose link someone deleted (ENOLINK) but still
// takes a header size on its queues; ApplyGuestFeatures must then leave
// the header size as it was, not half-applied. A packet socket refuses
// HASH_REPORT's 20-byte header; its header and offloads stay too.
func TestHostApplyGuestFeaturesRefusedChangesNothing(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlaf0")
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlaf1", Lower: "nctlaf0", Queues: 2, DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()
	if err := mv.SetOffloads(macvtap.OffloadCSUM); err != nil {
		t.Fatal(err)
	}
	l, _ := netlink.LinkByName("nctlaf1")
	if err := netlink.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	acked := virtio.Version1 | virtio.NetMrgRxbuf | virtio.NetGuestCsum | virtio.NetGuestTSO4
	_, err = macvtap.ApplyGuestFeatures(mv, acked)
	if !errors.Is(err, unix.ENOLINK) {
		t.Errorf("ApplyGuestFeatures on a deleted macvtap: %v, want the kernel's ENOLINK", err)
	}
	for q := 0; q < 2; q++ {
		if n, err := unix.IoctlGetInt(mv.QueueFD(q), unix.TUNGETVNETHDRSZ); err != nil || n != 10 {
			t.Errorf("queue %d: header size %d (%v) after the refused call, want the 10 it had", q, n, err)
		}
	}
	if o := mv.Offloads(); o != macvtap.OffloadCSUM {
		t.Errorf("offloads %v after the refused call, want csum", o)
	}

	lowerVeth(t, "nctlaf2")
	p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "nctlaf2", VnetHdrSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SetOffloads(macvtap.OffloadCSUM); err != nil {
		t.Fatal(err)
	}
	_, err = macvtap.ApplyGuestFeatures(p, acked|virtio.NetHashReport|virtio.NetGuestTSO6)
	if !errors.Is(err, macvtap.ErrNotSupported) {
		t.Errorf("HASH_REPORT on a packet socket: %v, want ErrNotSupported", err)
	}
	if v, err := unix.GetsockoptInt(p.FD(), unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ); err != nil || v != 10 {
		t.Errorf("packet socket header %d (%v) after the refused call, want 10", v, err)
	}
	if o := p.Offloads(); o != macvtap.OffloadCSUM {
		t.Errorf("packet socket offloads %v after the refused call, want csum", o)
	}
}
