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
		return backendKind{kind: "packet socket", vnetHdr: v != 0}, nil
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
		return backendKind{kind: "tap " + unix.ByteSliceToString(ifr.Name[:]), vnetHdr: ifr.Flags&linux.IFF_VNET_HDR != 0}, nil
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
