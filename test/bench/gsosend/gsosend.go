// Package gsosend is the host side of the vhost-net and vhost-user
// benches' receive runs: a sender that floods a tap with 64 KiB TCP/IPv4
// frames (GSO_TCPV4, checksum left to the device) through a
// PACKET_VNET_HDR packet socket, addressed to vhostnet/guest's GuestMAC.
package gsosend

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/vhostnet/guest"
)

// Start opens a packet socket on the link ifindex and sends the 64 KiB
// frame on it from a goroutine until the returned stop is called; each
// frame the kernel took is counted in sent when sent is not nil (a failed
// send backs off 100 µs). stop ends the sender, waits for it and closes
// the socket, which Start owns.
func Start(ifindex int, sent *atomic.Uint64) (stop func(), err error) {
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.SetsockoptInt(s, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		unix.Close(s)
		return nil, fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	fr := guest.IPv4Frame(guest.ProtoTCP, guest.HostIP, guest.GuestIP, 5201, 40000, guest.Pattern(65535-40, 2), true)
	vh := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4,
		HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	msg := append(vh.Append(nil, 10), fr...)
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: linux.Htons(0x0800), Halen: 6}
	copy(to.Addr[:], guest.GuestMAC)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := unix.Sendto(s, msg, 0, to); err != nil {
				time.Sleep(100 * time.Microsecond)
			} else if sent != nil {
				sent.Add(1)
			}
		}
	}()
	return func() { close(done); wg.Wait(); unix.Close(s) }, nil
}
