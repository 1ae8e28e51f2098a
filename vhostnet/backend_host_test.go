package vhostnet

import (
	"errors"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

// TestHostBackendHeader reads the header mode of real backends (taps and
// macvtaps with and without IFF_VNET_HDR, packet sockets with and without
// PACKET_VNET_HDR) and refuses bit 27 exactly where the header would be
// added twice.
func TestHostBackendHeader(t *testing.T) {
	testenv.Host(t)
	withHdr, err := macvtap.CreateTap(macvtap.TapConfig{Name: "hdr%d", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer withHdr.Close()
	noHdr, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nohdr%d"})
	if err != nil {
		t.Fatal(err)
	}
	defer noHdr.Close()
	pkt, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pkt)
	pktHdr, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pktHdr)
	if err := unix.SetsockoptInt(pktHdr, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		t.Fatal(err)
	}
	// macvtap queues: vhost-net takes them as it takes taps (tap_get_socket),
	// and they start with IFF_VNET_HDR on.
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "hdrlow0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "hdrlow1"}); err != nil {
		t.Fatal(err)
	}
	mvHdr, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "hdrmv0", Lower: "hdrlow0", VnetHdrSize: 12, DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mvHdr.Close()
	mvNoHdr, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "hdrmv1", Lower: "hdrlow0", NoVnetHdr: true, DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mvNoHdr.Close()
	dgram, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dgram)

	for _, c := range []struct {
		name    string
		fd      int
		kind    string
		vnetHdr bool
	}{
		{"tap with IFF_VNET_HDR", withHdr.FD(), "tap " + withHdr.Name(), true},
		{"tap without", noHdr.FD(), "tap " + noHdr.Name(), false},
		{"packet socket", pkt, "packet socket", false},
		{"packet socket with PACKET_VNET_HDR", pktHdr, "packet socket", true},
		{"macvtap (IFF_VNET_HDR)", mvHdr.FD(), "tap hdrmv0", true},
		{"macvtap without IFF_VNET_HDR", mvNoHdr.FD(), "tap hdrmv1", false},
	} {
		b, err := inspectBackend(c.fd)
		if err != nil || b.kind != c.kind || b.vnetHdr != c.vnetHdr {
			t.Errorf("%s: %+v, %v; want kind %q, vnet header %v", c.name, b, err, c.kind, c.vnetHdr)
		}
		err = checkHeader(virtio.Version1|virtio.VhostNetVirtioHdr, c.fd)
		if c.vnetHdr != (err != nil) || (err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "added twice"))) {
			t.Errorf("%s with bit 27: %v, want refusal only with a vnet header", c.name, err)
		}
		if err := checkHeader(virtio.Version1, c.fd); err != nil {
			t.Errorf("%s without bit 27: %v", c.name, err)
		}
	}
	// Without bit 27 the backend's header must be as long as vhost-net's.
	for _, c := range []struct {
		name string
		f    virtio.Features
		fd   int
		want string // "" for accepted
	}{
		{"12-byte tap, VERSION_1", virtio.Version1, withHdr.FD(), ""},
		{"12-byte tap, MRG_RXBUF", virtio.NetMrgRxbuf, withHdr.FD(), ""},
		{"12-byte tap, legacy", 0, withHdr.FD(), "has a 12-byte virtio-net header, but without VERSION_1 or MRG_RXBUF vhost-net passes 10 bytes"},
		{"10-byte packet socket, VERSION_1", virtio.Version1, pktHdr, "has a 10-byte virtio-net header, but with VERSION_1 vhost-net passes 12 bytes"},
		{"10-byte packet socket, legacy", 0, pktHdr, ""},
		{"tap without a header", virtio.Version1, noHdr.FD(), ""},
		{"12-byte macvtap, VERSION_1", virtio.Version1, mvHdr.FD(), ""},
		{"12-byte macvtap, legacy", 0, mvHdr.FD(), "has a 12-byte virtio-net header, but without VERSION_1 or MRG_RXBUF vhost-net passes 10 bytes"},
		{"macvtap without a header", virtio.Version1, mvNoHdr.FD(), ""},
		{"bit 27", virtio.Version1 | virtio.VhostNetVirtioHdr, withHdr.FD(), ""}, // checkHeader's case
	} {
		err := checkHeaderSize(c.f, c.fd)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := inspectBackend(dgram); !errors.Is(err, ErrInvalid) {
		t.Errorf("SOCK_DGRAM packet socket: %v, want ErrInvalid", err)
	}
}
