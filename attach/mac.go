package attach

import (
	"net"

	"github.com/netctl/netctl/hostnic"
)

// randomMAC is hostnic.RandomMAC.
var randomMAC = hostnic.RandomMAC

// tapMAC is the host side's address for a guest MAC: the guest's with the
// first byte 0xfe, as libvirt does, so that a bridge never takes the
// tap's address as its own and it differs from the guest's.
func tapMAC(guest net.HardwareAddr) net.HardwareAddr {
	m := append(net.HardwareAddr(nil), guest...)
	m[0] = 0xfe
	return m
}
