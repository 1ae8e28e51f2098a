package attach

import (
	"crypto/rand"
	"net"
)

// randomMAC is 52:54:00 (QEMU's prefix, locally administered) and three
// random bytes.
func randomMAC() net.HardwareAddr {
	b := make([]byte, 3)
	rand.Read(b)
	return net.HardwareAddr{0x52, 0x54, 0x00, b[0], b[1], b[2]}
}

// tapMAC is the host side's address for a guest MAC: the guest's with the
// first byte 0xfe, as libvirt does, so that a bridge never takes the
// tap's address as its own and it differs from the guest's.
func tapMAC(guest net.HardwareAddr) net.HardwareAddr {
	m := append(net.HardwareAddr(nil), guest...)
	m[0] = 0xfe
	return m
}
