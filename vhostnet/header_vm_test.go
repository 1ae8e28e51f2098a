package vhostnet

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// TestVMBit27WithVnetHdrTapRefused: bit 27 (ANY_LAYOUT, which vhost-net
// reads as VHOST_NET_F_VIRTIO_NET_HDR) with a tap that has IFF_VNET_HDR
// would put the header on twice. NewNIC refuses it with ErrInvalid before
// it opens anything; SetFeatures and SetBackend refuse it on a device,
// and the running data path keeps its header mode (frames arrive byte for
// byte).
func TestVMBit27WithVnetHdrTapRefused(t *testing.T) {
	k := testenv.VM(t)
	r := newRig(t, rigConfig{features: virtio.Version1})
	bad := r.nic.cfg
	bad.Features |= virtio.VhostNetVirtioHdr
	fds := testenv.OpenFDs(t)
	n, err := NewNIC(bad)
	if n != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "added twice") {
		t.Fatalf("kernel %s: NewNIC with bit 27 on a vnet_hdr tap: %v, want ErrInvalid saying the header would be added twice", k.Name, err)
	}
	if got := testenv.OpenFDs(t); got != fds {
		t.Errorf("the refused NewNIC left %d fds open, %d before", got, fds)
	}
	t.Logf("kernel %s: %v", k.Name, err)

	d, err := r.nic.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetFeatures(virtio.Version1 | virtio.VhostNetVirtioHdr); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetFeatures(bit 27) with a vnet_hdr tap attached: %v, want ErrInvalid", err)
	}
	if d.Acked() != virtio.Version1 {
		t.Errorf("acked %v after the refusal, want VERSION_1 unchanged", d.Acked())
	}
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(700, 27), false)
	r.guestSend(0, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatalf("after the refused SetFeatures the host got %d bytes, want the %d-byte frame", len(got), len(want))
	}

	// On a fresh device: bit 27 first, then the tap.
	d2, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if err := d2.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d2.SetFeatures(virtio.Version1 | virtio.VhostNetVirtioHdr); err != nil {
		t.Fatal(err)
	}
	if err := d2.SetBackend(RX, r.tap.QueueFD(0)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "added twice") {
		t.Errorf("SetBackend of a vnet_hdr tap after bit 27: %v, want ErrInvalid (not the kernel's EFAULT)", err)
	}
}

// TestVMBit27AddsTheHeader: with bit 27 and a tap without IFF_VNET_HDR,
// vhost strips the guest's header on TX and writes a zeroed one on RX.
func TestVMBit27AddsTheHeader(t *testing.T) {
	testenv.VM(t)
	r := newRig(t, rigConfig{features: virtio.Version1 | virtio.VhostNetVirtioHdr, noVnetHdr: true})
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(600, 1), false)
	r.guestSend(0, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatalf("host got %d bytes, want the %d-byte frame without the header", len(got), len(want))
	}
	r.rx[0].AddIn()
	want = guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(800, 2), false)
	r.host.Send(want)
	el, err := r.rx[0].Used(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(el.Data) != 12+len(want) || !bytes.Equal(el.Data[12:], want) || !bytes.Equal(el.Data[:12], make([]byte, 12)) {
		t.Fatalf("guest got %d bytes (% x...), want a zeroed 12-byte header and the %d-byte frame", len(el.Data), el.Data[:min(len(el.Data), 16)], len(want))
	}
}

// TestVMBit27WithVnetHdrPacketSocketRefused: the same refusal for a packet
// socket with PACKET_VNET_HDR.
func TestVMBit27WithVnetHdrPacketSocketRefused(t *testing.T) {
	testenv.VM(t)
	r := newRig(t, rigConfig{features: virtio.Version1})
	p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: r.tap.Name(), VnetHdrSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg := r.nic.cfg.clone()
	r.nic.Close()
	cfg.Features = virtio.VhostNetVirtioHdr // 10-byte header mode
	cfg.Queues[0].Backend = p.FD()
	if n, err := NewNIC(cfg); n != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "packet socket") {
		t.Fatalf("bit 27 with a PACKET_VNET_HDR socket: %v, want ErrInvalid naming the packet socket", err)
	}
}

// TestVMHeaderSizeMismatchRefused: without bit 27 vhost-net passes a 12-byte
// header with VERSION_1; a tap set to 10 bytes would garble every frame to
// the guest, so NewNIC refuses it before it opens anything.
func TestVMHeaderSizeMismatchRefused(t *testing.T) {
	k := testenv.VM(t)
	r := newRig(t, rigConfig{features: virtio.Version1})
	cfg := r.nic.cfg.clone()
	r.nic.Close()
	if err := r.tap.SetVnetHdrSize(10); err != nil {
		t.Fatal(err)
	}
	fds := testenv.OpenFDs(t)
	n, err := NewNIC(cfg)
	if n != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "10-byte virtio-net header, but with VERSION_1 vhost-net passes 12") {
		t.Fatalf("kernel %s: a 10-byte tap with VERSION_1: %v, want ErrInvalid naming both sizes", k.Name, err)
	}
	if got := testenv.OpenFDs(t); got != fds {
		t.Errorf("the refused NewNIC left %d fds open, %d before", got, fds)
	}
	// Set back to 12, the same config works.
	if err := r.tap.SetVnetHdrSize(12); err != nil {
		t.Fatal(err)
	}
	if n, err = NewNIC(cfg); err != nil {
		t.Fatal(err)
	}
	r.nic = n
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(300, 12), false)
	r.guestSend(0, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatal("no traffic with the header sizes matching")
	}
}
