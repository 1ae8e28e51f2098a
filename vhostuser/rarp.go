package vhostuser

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// rarpFrame is the announcement QEMU sends for a guest after migration
// (net/announce.c): a broadcast RARP "reverse request" naming the guest's
// MAC as sender and target, padded to the 60-byte minimum, so that
// switches learn where the guest now is.
func rarpFrame(mac net.HardwareAddr) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x8035) // ETH_P_RARP
	binary.BigEndian.PutUint16(f[14:], 1)      // hardware type: Ethernet
	binary.BigEndian.PutUint16(f[16:], 0x0800) // protocol type: IPv4
	f[18], f[19] = 6, 4                        // address lengths
	binary.BigEndian.PutUint16(f[20:], 3)      // reverse request
	copy(f[22:28], mac)                        // sender hardware address; sender IP 0
	copy(f[32:38], mac)                        // target hardware address; target IP 0
	return f
}

// sendRARP writes the announcement for the MAC in the first 6 bytes of
// v into the tap's first queue, after a zero virtio-net header of the
// size the tap uses: the tap delivers it to the host as if the guest had
// sent it.
func (s *session) sendRARP(v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	mac := net.HardwareAddr(b[:6])
	if mac[0]&1 != 0 {
		return fmt.Errorf("SEND_RARP: %v is a multicast address, not a guest's: %w", mac, ErrInvalid)
	}
	frame := append(make([]byte, s.hdrSize), rarpFrame(mac)...)
	fd := s.b.cfg.Backend.QueueFD(0)
	n, err := unix.Write(fd, frame)
	if err != nil {
		return fmt.Errorf("SEND_RARP: write to the tap: %w", err)
	}
	if n != len(frame) {
		return fmt.Errorf("SEND_RARP: wrote %d of %d bytes to the tap", n, len(frame))
	}
	s.log.Info("vhost-user: announced the guest after migration (RARP)", "mac", mac.String())
	return nil
}
