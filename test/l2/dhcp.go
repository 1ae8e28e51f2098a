package l2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// DHCP message types (RFC 2132 option 53).
type DHCPType uint8

const (
	DHCPDiscover DHCPType = 1
	DHCPOffer    DHCPType = 2
	DHCPRequest  DHCPType = 3
	DHCPAck      DHCPType = 5
)

func (t DHCPType) String() string {
	switch t {
	case DHCPDiscover:
		return "DHCPDISCOVER"
	case DHCPOffer:
		return "DHCPOFFER"
	case DHCPRequest:
		return "DHCPREQUEST"
	case DHCPAck:
		return "DHCPACK"
	}
	return fmt.Sprintf("DHCP type %d", uint8(t))
}

// DHCPMessage is what ParseDHCP read from a client's frame.
type DHCPMessage struct {
	Type   DHCPType
	XID    uint32
	Flags  uint16
	Client net.HardwareAddr // chaddr
	Source net.HardwareAddr // the Ethernet source
}

const (
	ethHdr      = 14
	bootpFixed  = 236 // op .. file
	dhcpCookie  = 0x63825363
	bootpServer = 67
	bootpClient = 68
	minBootp    = 300 // RFC 1542's minimum BOOTP message
)

var errNotDHCP = errors.New("not a DHCP request")

// ParseDHCP reads an Ethernet frame as a client's DHCP request (IPv4,
// UDP to port 67, BOOTREQUEST with the DHCP cookie and option 53). A frame
// that is anything else gives an error wrapping errNotDHCP; it never
// panics or allocates more than the frame's addresses.
func ParseDHCP(frame []byte) (DHCPMessage, error) {
	var m DHCPMessage
	if len(frame) < ethHdr+20 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
		return m, fmt.Errorf("%w: not IPv4", errNotDHCP)
	}
	ip := frame[ethHdr:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl+8 || ip[9] != 17 {
		return m, fmt.Errorf("%w: not UDP over IPv4", errNotDHCP)
	}
	if off := binary.BigEndian.Uint16(ip[6:]) & 0x3fff; off != 0 {
		return m, fmt.Errorf("%w: a fragment", errNotDHCP)
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ihl+8 || total > len(ip) {
		return m, fmt.Errorf("%w: IPv4 total length %d of %d bytes", errNotDHCP, total, len(ip))
	}
	udp := ip[ihl:total]
	if binary.BigEndian.Uint16(udp[2:]) != bootpServer {
		return m, fmt.Errorf("%w: UDP to port %d", errNotDHCP, binary.BigEndian.Uint16(udp[2:]))
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8 || ulen > len(udp) {
		return m, fmt.Errorf("%w: UDP length %d of %d bytes", errNotDHCP, ulen, len(udp))
	}
	b := udp[8:ulen]
	if len(b) < bootpFixed+4 || b[0] != 1 || b[1] != 1 || b[2] != 6 {
		return m, fmt.Errorf("%w: not an Ethernet BOOTREQUEST", errNotDHCP)
	}
	if binary.BigEndian.Uint32(b[bootpFixed:]) != dhcpCookie {
		return m, fmt.Errorf("%w: no DHCP magic cookie", errNotDHCP)
	}
	m.XID = binary.BigEndian.Uint32(b[4:])
	m.Flags = binary.BigEndian.Uint16(b[10:])
	m.Client = net.HardwareAddr(append([]byte(nil), b[28:34]...))
	m.Source = net.HardwareAddr(append([]byte(nil), frame[6:12]...))
	for opts := b[bootpFixed+4:]; len(opts) > 0; {
		code := opts[0]
		if code == 255 {
			break
		}
		if code == 0 {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
			return m, fmt.Errorf("%w: option %d runs past the message", errNotDHCP, code)
		}
		if code == 53 && opts[1] == 1 {
			m.Type = DHCPType(opts[2])
		}
		opts = opts[2+int(opts[1]):]
	}
	if m.Type == 0 {
		return m, fmt.Errorf("%w: no message type (option 53)", errNotDHCP)
	}
	return m, nil
}

// DHCPReply builds the server's answer to req as an Ethernet frame from
// serverMAC/server to the client (broadcast when the client asked for it
// with the BROADCAST flag): typ (DHCPOffer or DHCPAck) of yiaddr in a /24,
// an hour's lease. Addresses must be IPv4.
func DHCPReply(req DHCPMessage, typ DHCPType, serverMAC net.HardwareAddr, server, yiaddr netip.Addr) []byte {
	bootp := make([]byte, minBootp)
	bootp[0], bootp[1], bootp[2] = 2, 1, 6 // BOOTREPLY, Ethernet
	binary.BigEndian.PutUint32(bootp[4:], req.XID)
	binary.BigEndian.PutUint16(bootp[10:], req.Flags)
	y, s := yiaddr.As4(), server.As4()
	copy(bootp[16:], y[:])
	copy(bootp[20:], s[:])
	copy(bootp[28:], req.Client)
	binary.BigEndian.PutUint32(bootp[bootpFixed:], dhcpCookie)
	opts := []byte{53, 1, byte(typ), 54, 4, s[0], s[1], s[2], s[3], 51, 4, 0, 0, 0x0e, 0x10, 1, 4, 255, 255, 255, 0, 255}
	copy(bootp[bootpFixed+4:], opts)

	udp := make([]byte, 8+len(bootp))
	binary.BigEndian.PutUint16(udp[0:], bootpServer)
	binary.BigEndian.PutUint16(udp[2:], bootpClient)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], bootp) // checksum 0: none (allowed over IPv4)

	ip := make([]byte, 20+len(udp))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], s[:])
	dst := y
	if req.Flags&0x8000 != 0 {
		dst = [4]byte{255, 255, 255, 255}
	}
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	copy(ip[20:], udp)

	frame := make([]byte, ethHdr+len(ip))
	if req.Flags&0x8000 != 0 {
		copy(frame[0:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	} else {
		copy(frame[0:], req.Client)
	}
	copy(frame[6:], serverMAC)
	binary.BigEndian.PutUint16(frame[12:], 0x0800)
	copy(frame[ethHdr:], ip)
	return frame
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
