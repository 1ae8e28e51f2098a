package macvtap_test

import (
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostPacketSocketSeesOnlyItsInterface: while another interface of the
// namespace is flooded, frames of that interface never reach a packet
// socket bound to this one, not even in the moment between socket() and
// bind() (a socket opened with ETH_P_ALL queues every interface's frames
// until it is bound).
func TestHostPacketSocketSeesOnlyItsInterface(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlpi0") // the backend's interface (quiet)
	lowerVeth(t, "nctlpo0") // another interface, flooded through its peer
	own, _ := net.InterfaceByName("nctlpi0")
	other, _ := net.InterfaceByName("nctlpo0p")
	var stop atomic.Bool
	sent := make(chan int, 1)
	testenv.Go(t, func() {
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			sent <- -1
			return
		}
		defer unix.Close(s)
		frame := make([]byte, 60)
		copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9, 0x88, 0xb5}) // local experimental ethertype
		to := &unix.SockaddrLinklayer{Ifindex: other.Index, Protocol: linux.Htons(0x88b5), Halen: 6}
		n := 0
		for !stop.Load() {
			if unix.Sendto(s, frame, 0, to) == nil {
				n++
			}
		}
		sent <- n
	})
	leaked := 0
	buf := make([]byte, 2048)
	for i := 0; i < 100; i++ {
		p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "nctlpi0", VnetHdrSize: 10, Promisc: true})
		if err != nil {
			stop.Store(true)
			t.Fatal(err)
		}
		for {
			_, from, err := unix.Recvfrom(p.FD(), buf, unix.MSG_DONTWAIT)
			if err != nil {
				break
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Ifindex != own.Index {
				leaked++
			}
		}
		p.Close()
	}
	stop.Store(true)
	if n := <-sent; n <= 0 {
		t.Fatalf("the flood sent %d frames", n)
	} else {
		t.Logf("%d frames flooded nctlpo0 while 100 packet sockets were opened on nctlpi0", n)
	}
	if leaked != 0 {
		t.Errorf("%d frames of another interface reached packet sockets bound to nctlpi0", leaked)
	}
}
