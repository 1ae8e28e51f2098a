package macvtap

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// PacketConfig says which interface a packet-socket backend binds to.
type PacketConfig struct {
	Interface string
	// VnetHdrSize: 0 for no virtio-net header (then vhost-net must add
	// and strip it: VHOST_NET_F_VIRTIO_NET_HDR, and no offloads), 10
	// (PACKET_VNET_HDR), or 12 (PACKET_VNET_HDR_SZ, which 6.1 lacks).
	VnetHdrSize int
	// Promisc puts the interface in promiscuous mode for this socket, so
	// frames for the guest's MAC address reach it.
	Promisc bool
}

// PacketSocket is an AF_PACKET SOCK_RAW socket bound to one interface: the
// third kind of vhost-net backend, beside tap and macvtap. It sees every
// frame the interface receives and sends frames out of it; frames other
// sockets send out of the interface are ignored (PACKET_IGNORE_OUTGOING).
// The kernel hands it GSO frames as they arrive, so the offloads are the
// interface's (see Features); there is no TUNSETOFFLOAD.
type PacketSocket struct {
	mu       sync.Mutex // guards fd, hdr, offloads
	fd       int
	iface    string
	ifindex  int
	hdr      int
	offloads Offloads
}

// OpenPacketSocket opens and binds the socket, which the PacketSocket owns.
// Only frames of cfg.Interface ever reach it: it is opened with protocol 0
// and gets ETH_P_ALL only in bind, together with the interface. On failure
// nothing is left open. Equivalent: socket(AF_PACKET, SOCK_RAW, 0);
// setsockopt(PACKET_VNET_HDR); bind(ETH_P_ALL, ifindex).
func OpenPacketSocket(cfg PacketConfig) (*PacketSocket, error) {
	if err := checkPacketHdrSize(cfg.VnetHdrSize); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("packet socket: interface %q does not exist (%v): name an existing interface (ip link show): %w", cfg.Interface, err, ErrInvalid)
	}
	// Protocol 0: the socket receives nothing until bind names the
	// interface and the protocol together. Opened with ETH_P_ALL, it
	// would queue frames of every interface in the namespace until bind,
	// and those could reach the guest.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("packet socket: needs CAP_NET_RAW: run as root: %w", err)
		}
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	p := &PacketSocket{fd: fd, iface: cfg.Interface, ifindex: ifi.Index}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if err := p.SetVnetHdrSize(cfg.VnetHdrSize); err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil { // Linux 4.20+
		return nil, fmt.Errorf("packet socket on %s: PACKET_IGNORE_OUTGOING (Linux 4.20): %w", cfg.Interface, err)
	}
	if cfg.Promisc {
		mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			return nil, fmt.Errorf("packet socket on %s: promiscuous mode: %w", cfg.Interface, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("packet socket: bind to %s: %w", cfg.Interface, err)
	}
	ok = true
	return p, nil
}

// Name is the interface the socket is bound to.
func (p *PacketSocket) Name() string { return p.iface }

// FD returns the socket, still owned by the PacketSocket.
func (p *PacketSocket) FD() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fd
}

// checkPacketHdrSize: a packet socket's header is 0 (none), 10
// (PACKET_VNET_HDR) or 12 (PACKET_VNET_HDR_SZ, which 6.1 lacks).
func checkPacketHdrSize(n int) error {
	switch n {
	case 0, linux.VIRTIO_NET_HDR_LEN, linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN:
		return nil
	case linux.VIRTIO_NET_HDR_V1_HASH_LEN:
		return fmt.Errorf("packet socket: a 20-byte virtio-net header (HASH_REPORT) is not possible: the kernel takes 10 or 12 "+
			"(PACKET_VNET_HDR_SZ); negotiate without HASH_REPORT, or use a tap: %w", ErrNotSupported)
	}
	return fmt.Errorf("packet socket: virtio-net header size %d: use 0, 10 or 12: %w", n, ErrInvalid)
}

// SetVnetHdrSize sets the virtio-net header size: 0 (off), 10 or 12.
func (p *PacketSocket) SetVnetHdrSize(n int) error {
	if err := checkPacketHdrSize(n); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return fmt.Errorf("packet socket on %s: header size: %w", p.iface, ErrClosed)
	}
	var err error
	switch n {
	case 0, linux.VIRTIO_NET_HDR_LEN:
		v := 0
		if n != 0 {
			v = 1
		}
		err = unix.SetsockoptInt(p.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, v)
	case linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN:
		err = unix.SetsockoptInt(p.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ, n)
		if errors.Is(err, unix.ENOPROTOOPT) {
			return fmt.Errorf("packet socket on %s: a 12-byte virtio-net header needs PACKET_VNET_HDR_SZ, "+
				"which this kernel lacks (6.1 has only the 10-byte header): negotiate without VERSION_1 and MRG_RXBUF, "+
				"or use a tap: %w: %w", p.iface, ErrNotSupported, err)
		}
	}
	if err != nil {
		return fmt.Errorf("packet socket on %s: header size %d: %w", p.iface, n, err)
	}
	p.hdr = n
	return nil
}

// VnetHdrSize is the header size last set (0: none).
func (p *PacketSocket) VnetHdrSize() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return 0, fmt.Errorf("packet socket on %s: header size: %w", p.iface, ErrClosed)
	}
	return p.hdr, nil
}

// Close closes the socket (and leaves promiscuous mode). Closing twice is
// not an error.
func (p *PacketSocket) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}
