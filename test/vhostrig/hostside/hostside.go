// Package hostside is the host's end of a tap whose guest end a test or a
// bench drives with vhostnet/guest's userspace driver: an AF_PACKET socket
// bound to the tap that receives what the guest sent and sends frames that
// arrive in the guest's RX rings. It imports no vhost package, so that
// vhostnet's own tests can use it as well as test/vufront and the benches.
package hostside

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet/guest"
)

// Open returns an AF_PACKET socket bound to the link ifindex for every
// protocol (bound, not opened with one: no other link's frames queue up
// before the bind), blind to the frames the host itself sends on it
// (PACKET_IGNORE_OUTGOING), whose receives time out after timeout. The
// caller owns the returned fd and closes it.
func Open(ifindex int, timeout time.Duration) (int, error) {
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("packet socket: bind to ifindex %d: %w", ifindex, err)
	}
	if err := unix.SetsockoptInt(s, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("packet socket: PACKET_IGNORE_OUTGOING: %w", err)
	}
	tv := unix.NsecToTimeval(int64(timeout))
	if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(s)
		return -1, fmt.Errorf("packet socket: SO_RCVTIMEO: %w", err)
	}
	return s, nil
}

// Side is a test's host side of one link: FD is its packet socket (Open,
// with a 100 ms receive timeout and a 4 MiB receive buffer asked for),
// which the test's cleanup closes. Its failures go to the test that made
// it. Not safe for concurrent use.
type Side struct {
	t       testing.TB
	Ifindex int
	FD      int
}

// New opens the host side of the link ifindex for t.
func New(t testing.TB, ifindex int) *Side {
	t.Helper()
	s, err := Open(ifindex, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s) })
	unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	return &Side{t: t, Ifindex: ifindex, FD: s}
}

// NewTap creates the tap cfg asks for in the caller's network namespace
// (testenv.Host or the VM's own), turns its IPv6 off (no router
// solicitations or MLD into the guest's rings), brings it up and opens its
// host side. The test's cleanup closes the tap's fds.
func NewTap(t testing.TB, cfg macvtap.TapConfig) (*macvtap.Tap, *Side) {
	t.Helper()
	tap, err := macvtap.CreateTap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	Up(t, tap.Name())
	ifi, err := net.InterfaceByName(tap.Name())
	if err != nil {
		t.Fatal(err)
	}
	return tap, New(t, ifi.Index)
}

// Up turns the link name's IPv6 off and brings it up.
func Up(t testing.TB, name string) {
	t.Helper()
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	testenv.LinkUp(t, name)
}

// Send transmits frame (an Ethernet frame, no virtio-net header) on the
// link, to the destination MAC in its first 6 bytes: it arrives in a guest
// RX ring.
func (s *Side) Send(frame []byte) {
	s.t.Helper()
	if err := unix.Sendto(s.FD, frame, 0, &unix.SockaddrLinklayer{Ifindex: s.Ifindex, Halen: 6,
		Addr: [8]byte{frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]}}); err != nil {
		s.t.Fatalf("host send: %v", err)
	}
}

// SendGSO sends the IPv4 frame with the 10-byte header vh through a
// PACKET_VNET_HDR socket of its own, so that it stays one GSO skb up to
// the tap, to guest.GuestMAC. The socket is made in the calling thread's
// network namespace: call it from the goroutine that is in the link's
// (testenv.Host's test goroutine, not a subtest's), or anywhere in the VM.
func (s *Side) SendGSO(vh guest.NetHdr, frame []byte) {
	s.t.Helper()
	g, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer unix.Close(g)
	if err := unix.SetsockoptInt(g, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		s.t.Fatal(err)
	}
	to := &unix.SockaddrLinklayer{Ifindex: s.Ifindex, Protocol: linux.Htons(0x0800), Halen: 6}
	copy(to.Addr[:], guest.GuestMAC)
	if err := unix.Sendto(g, append(vh.Append(nil, 10), frame...), 0, to); err != nil {
		s.t.Fatal(err)
	}
}

// Recv returns the next frame the host sees on the link that match
// accepts, or nil after timeout.
func (s *Side) Recv(timeout time.Duration, match func([]byte) bool) []byte {
	buf := make([]byte, 128<<10)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(s.FD, buf, 0)
		if err == nil && match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	return nil
}

// Is matches the frames equal to want byte for byte.
func Is(want []byte) func([]byte) bool {
	return func(f []byte) bool { return bytes.Equal(f, want) }
}

// From matches the IPv4 frames from src.
func From(src []byte) func([]byte) bool {
	return func(f []byte) bool {
		return len(f) >= 34 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && bytes.Equal(f[26:30], src)
	}
}

// Spread sends n small UDP frames from the host to the guest, each of its
// own flow (destination port), and returns how many frames each queue of
// rx received within 5 s: tun spreads flows over its queues by hash, each
// queue into its own pair's RX ring. The rings must have buffers posted;
// Spread polls them (it reads no payload).
func (s *Side) Spread(rx []*guest.Queue, n int) []int {
	s.t.Helper()
	for i := 0; i < n; i++ {
		s.Send(guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, uint16(6000+i*17), guest.Pattern(64, byte(i)), false))
	}
	per := make([]int, len(rx))
	deadline := time.Now().Add(5 * time.Second)
	for total := 0; total < n && time.Now().Before(deadline); {
		for q, r := range rx {
			if _, ok, err := r.Poll(); err != nil {
				s.t.Fatal(err)
			} else if ok {
				per[q]++
				total++
			}
		}
	}
	return per
}
