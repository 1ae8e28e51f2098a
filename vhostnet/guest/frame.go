package guest

import (
	"encoding/binary"
)

// Frames for tests and selftest: Ethernet + IPv4 + TCP or UDP between the
// guest (10.99.0.1) and the host side (10.99.0.2). The addresses exist only
// inside the private network namespace the traffic runs in.

var (
	GuestMAC = []byte{0x02, 0, 0, 0, 0, 0x01}
	HostMAC  = []byte{0x02, 0, 0, 0, 0, 0x02}
	GuestIP  = []byte{10, 99, 0, 1}
	HostIP   = []byte{10, 99, 0, 2}
)

// IP protocol numbers for IPv4Frame.
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

func csumFold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

func csumAdd(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	return sum
}

// IPv4Frame builds eth/IPv4/L4 with payload: from the guest when src is
// GuestIP, else from the host. With partial, the L4 checksum
// holds only the pseudo-header sum, as a sender with checksum offload
// leaves it (VIRTIO_NET_HDR_F_NEEDS_CSUM).
func IPv4Frame(proto byte, src, dst []byte, sport, dport uint16, payload []byte, partial bool) []byte {
	l4len := 8
	if proto == 6 {
		l4len = 20
	}
	f := make([]byte, 14+20+l4len+len(payload))
	if src[3] == GuestIP[3] {
		copy(f[0:], HostMAC)
		copy(f[6:], GuestMAC)
	} else {
		copy(f[0:], GuestMAC)
		copy(f[6:], HostMAC)
	}
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4len+len(payload)))
	ip[8], ip[9] = 64, proto
	copy(ip[12:], src)
	copy(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[10:], ^csumFold(csumAdd(0, ip)))
	l4 := f[34:]
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	csumOff := 6
	if proto == 6 {
		binary.BigEndian.PutUint32(l4[4:], 1000) // seq
		l4[12] = 5 << 4                          // data offset
		l4[13] = 0x18                            // PSH|ACK
		binary.BigEndian.PutUint16(l4[14:], 65535)
		csumOff = 16
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(payload)))
	}
	copy(l4[l4len:], payload)
	pseudo := csumAdd(csumAdd(0, src), dst) + uint32(proto) + uint32(len(l4))
	if partial {
		binary.BigEndian.PutUint16(l4[csumOff:], csumFold(pseudo))
	} else {
		binary.BigEndian.PutUint16(l4[csumOff:], ^csumFold(csumAdd(pseudo, l4)))
	}
	return f
}

// Pattern is n bytes of a repeatable pattern seeded by seed.
func Pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i>>8)
	}
	return b
}
