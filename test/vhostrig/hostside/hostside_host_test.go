package hostside

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet/guest"
)

// TestHostSide plays the guest on the tap's own queue fd (what vhost-net
// reads and writes): what the host side sends arrives there, whole or as
// one GSO frame; what the guest writes the host side receives, and it
// does not see its own frames. No subtests: a new socket must be made on
// the test's goroutine, whose thread is in the test's network namespace.
func TestHostSide(t *testing.T) {
	testenv.Host(t)
	tap, side := NewTap(t, macvtap.TapConfig{Name: "hs%d", VnetHdr: true, VnetHdrSize: 12})
	if err := tap.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4); err != nil {
		t.Fatal(err)
	}
	fd := tap.QueueFD(0)

	// Send: the frame arrives at the guest as it was.
	{
		want := guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(700, 3), false)
		side.Send(want)
		if _, got := readTap(t, fd); !bytes.Equal(got, want) {
			t.Fatalf("the tap read %d bytes, want the %d-byte frame sent", len(got), len(want))
		}
	}
	// SendGSO: the frame stays one GSO frame up to the guest.
	{
		want := guest.IPv4Frame(6, guest.HostIP, guest.GuestIP, 5201, 40000, guest.Pattern(60000, 4), true)
		side.SendGSO(guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4,
			HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}, want)
		h, got := readTap(t, fd)
		if !bytes.Equal(got, want) {
			t.Fatalf("the tap read %d bytes, want the %d-byte frame sent whole", len(got), len(want))
		}
		if h.GSOType != linux.VIRTIO_NET_HDR_GSO_TCPV4 || h.GSOSize != 1448 {
			t.Errorf("header %+v: want GSO_TCPV4 with gso_size 1448", h)
		}
	}
	// Recv: what the guest writes reaches the host side.
	{
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(300, 5), false)
		if _, err := unix.Write(fd, append(guest.NetHdr{}.Append(nil, 12), want...)); err != nil {
			t.Fatal(err)
		}
		if got := side.Recv(5*time.Second, From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("the host side received %d bytes, want the %d-byte frame the guest wrote", len(got), len(want))
		}
	}
	// The host side does not see the host's frames (PACKET_IGNORE_OUTGOING).
	{
		// (A socket never sees its own frames; SendGSO's is another one.)
		side.SendGSO(guest.NetHdr{}, guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4001, guest.Pattern(100, 6), false))
		readTap(t, fd)
		if got := side.Recv(300*time.Millisecond, From(guest.HostIP)); got != nil {
			t.Fatalf("the host side received the host's own %d-byte frame", len(got))
		}
	}
	// From matches only an IPv4 frame's source address; Is only equal bytes.
	{
		f := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 1, 2, nil, false)
		if !From(guest.GuestIP)(f) || From(guest.HostIP)(f) || From(guest.GuestIP)(f[:33]) {
			t.Fatal("From matches on anything but an IPv4 frame's source address")
		}
		if !Is(f)(append([]byte(nil), f...)) || Is(f)(f[:len(f)-1]) || Is(f[:len(f)-1])(f) {
			t.Fatal("Is matches on anything but equal bytes")
		}
	}
}

// readTap returns the next IPv4 frame from HostIP that the tap's queue fd
// gives, and its virtio-net header, failing after 5 s.
func readTap(t *testing.T, fd int) (guest.NetHdr, []byte) {
	t.Helper()
	buf := make([]byte, 128<<10)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 100); err != nil || n == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n < 12 || !From(guest.HostIP)(buf[12:n]) {
			continue
		}
		h, err := guest.ParseNetHdr(buf[:n], 12)
		if err != nil {
			t.Fatal(err)
		}
		return h, append([]byte(nil), buf[12:n]...)
	}
	t.Fatal("the tap gave no frame from the host within 5 s")
	return guest.NetHdr{}, nil
}
