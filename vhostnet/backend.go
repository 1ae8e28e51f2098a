package vhostnet

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// backendKind is what kind of vhost-net backend an fd is, and whether it
// carries a virtio-net header itself (tap IFF_VNET_HDR, PACKET_VNET_HDR).
type backendKind struct {
	kind     string // "tap", "packet socket"
	vnetHdr  bool   // the backend reads and writes its own virtio-net header
	hdrSize  int    // its size, when vnetHdr
	detached bool   // a tun fd attached to no device (TUNGETIFF: EBADFD): header unknown
}

// inspectBackend tells what fd is, without changing it. vhost-net takes an
// AF_PACKET SOCK_RAW socket, or a tun/tap, macvtap or ipvtap queue
// (drivers/vhost/net.c get_socket); anything else is an ErrInvalid error.
// It does not take ownership of fd.
func inspectBackend(fd int) (backendKind, error) {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err == nil {
		typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		if err != nil {
			return backendKind{}, fmt.Errorf("backend fd %d: SO_TYPE: %w", fd, err)
		}
		if domain != unix.AF_PACKET || typ != unix.SOCK_RAW {
			return backendKind{}, fmt.Errorf("backend fd %d is a socket of family %d, type %d: %w: "+
				"vhost-net takes only AF_PACKET SOCK_RAW sockets, taps and macvtaps", fd, domain, typ, ErrInvalid)
		}
		v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR)
		if err != nil {
			return backendKind{}, fmt.Errorf("backend fd %d: PACKET_VNET_HDR: %w", fd, err)
		}
		b := backendKind{kind: "packet socket", vnetHdr: v != 0}
		if b.vnetHdr {
			// PACKET_VNET_HDR_SZ came in Linux 6.2; before it the header is 10 bytes.
			b.hdrSize = 10
			if sz, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ); err == nil {
				b.hdrSize = sz
			}
		}
		return b, nil
	}
	if errors.Is(err, unix.EBADF) {
		return backendKind{}, fmt.Errorf("backend fd %d is not open: %w: %w", fd, ErrInvalid, err)
	}
	if !errors.Is(err, unix.ENOTSOCK) {
		return backendKind{}, fmt.Errorf("backend fd %d: %w", fd, err)
	}
	var ifr linux.Ifreq
	err = linux.Ioctl(fd, linux.TUNGETIFF, unsafe.Pointer(&ifr))
	switch {
	case err == nil:
		b := backendKind{kind: "tap " + unix.ByteSliceToString(ifr.Name[:]), vnetHdr: ifr.Flags&linux.IFF_VNET_HDR != 0}
		if b.vnetHdr {
			sz, err := linux.GetU32(fd, linux.TUNGETVNETHDRSZ)
			if err != nil {
				return backendKind{}, fmt.Errorf("backend fd %d: %w", fd, err)
			}
			b.hdrSize = int(int32(sz))
		}
		return b, nil
	case errors.Is(err, unix.EBADFD):
		return backendKind{kind: "tun fd", detached: true}, nil
	}
	return backendKind{}, fmt.Errorf("backend fd %d is neither a tap, a macvtap nor a packet socket (%w): %w", fd, err, ErrInvalid)
}

// checkHeader refuses a backend that would see the virtio-net header twice:
// with VHOST_NET_F_VIRTIO_NET_HDR (bit 27, the same bit as ANY_LAYOUT)
// acknowledged, vhost adds and strips the header itself, so a backend
// that has its own header too (tap IFF_VNET_HDR, PACKET_VNET_HDR) would
// read the guest's header as its own on TX and hand the guest two headers
// on RX (kernel-facts.md §1.6).
func checkHeader(f virtio.Features, fd int) error {
	if !f.Has(virtio.VhostNetVirtioHdr) || fd < 0 {
		return nil
	}
	b, err := inspectBackend(fd)
	if err != nil {
		return err
	}
	return checkHeaderOf(f, b, fd)
}

// checkHeaderOf is checkHeader for a backend already inspected.
func checkHeaderOf(f virtio.Features, b backendKind, fd int) error {
	if !f.Has(virtio.VhostNetVirtioHdr) {
		return nil
	}
	switch {
	case b.detached:
		return fmt.Errorf("bit 27 (VHOST_NET_F_VIRTIO_NET_HDR) acknowledged, and backend fd %d is a tun queue attached to no "+
			"device, whose header cannot be read: %w: attach the queue first", fd, ErrInvalid)
	case b.vnetHdr:
		return fmt.Errorf("bit 27 (ANY_LAYOUT, which vhost-net reads as VHOST_NET_F_VIRTIO_NET_HDR: vhost adds and strips "+
			"the virtio-net header) acknowledged with a backend (%s, fd %d) that has its own virtio-net header: "+
			"the header would be added twice: %w: clear bit 27 (a VERSION_1 guest does not need ANY_LAYOUT), "+
			"or use a backend without IFF_VNET_HDR / PACKET_VNET_HDR", b.kind, fd, ErrInvalid)
	}
	return nil
}

// sockHdrLen is the virtio-net header vhost-net expects from a backend
// that has its own (sock_hlen, kernel-facts.md §1.6): 12 bytes with
// VERSION_1 or MRG_RXBUF, else 10.
func sockHdrLen(f virtio.Features) int {
	if f&(virtio.Version1|virtio.NetMrgRxbuf) != 0 {
		return 12
	}
	return 10
}

// checkHeaderSize refuses a backend whose own virtio-net header differs in
// size from what vhost-net passes it (bit 27 clear): tun and macvtap
// would read the frame at the wrong offset and garble every frame to the
// guest. A backend without a header is left alone here.
func checkHeaderSize(f virtio.Features, fd int) error {
	if f.Has(virtio.VhostNetVirtioHdr) {
		return nil
	}
	b, err := inspectBackend(fd)
	if err != nil {
		return err
	}
	return checkHeaderSizeOf(f, b, fd)
}

// checkHeaderSizeOf is checkHeaderSize for a backend already inspected.
func checkHeaderSizeOf(f virtio.Features, b backendKind, fd int) error {
	if f.Has(virtio.VhostNetVirtioHdr) || !b.vnetHdr {
		return nil
	}
	if want := sockHdrLen(f); b.hdrSize != want {
		mode := "without VERSION_1 or MRG_RXBUF"
		if want == 12 {
			mode = "with " + (f & (virtio.Version1 | virtio.NetMrgRxbuf)).String()
		}
		return fmt.Errorf("backend %s (fd %d) has a %d-byte virtio-net header, but %s vhost-net passes %d bytes: %w: "+
			"set the backend's header size to %d (TUNSETVNETHDRSZ, PACKET_VNET_HDR_SZ)", b.kind, fd, b.hdrSize, mode, want, ErrInvalid, want)
	}
	return nil
}
