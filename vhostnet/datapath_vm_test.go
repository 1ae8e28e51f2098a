package vhostnet

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

const testEtherType = 0x88b5 // IEEE local experimental

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// testFrame is an Ethernet broadcast frame of the test ethertype with a
// numbered byte pattern.
func testFrame(seq byte, n int) []byte {
	f := make([]byte, 14+n)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], testEtherType)
	for i := 14; i < len(f); i++ {
		f[i] = seq + byte(i*7)
	}
	return f
}

// packetSocket is an AF_PACKET socket bound to the interface: the host
// side of the tap.
func packetSocket(t *testing.T, ifindex int) int {
	t.Helper()
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s) })
	if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return s
}

// TestVMPacketsBothWays sets up one vhost-net queue pair over a tap with a
// 12-byte virtio-net header, sends a frame from the userspace driver's TX
// ring to the host and one from the host into the RX ring, and compares
// them byte for byte.
func TestVMPacketsBothWays(t *testing.T) {
	testenv.VM(t)
	testenv.Host(t)

	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vhdp%d", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	testenv.LinkUp(t, tap.Name())
	ifi, err := net.InterfaceByName(tap.Name())
	if err != nil {
		t.Fatal(err)
	}
	sock := packetSocket(t, ifi.Index)

	mem, err := guest.NewMemory(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	rx, err := guest.NewQueue(mem, 256, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := guest.NewQueue(mem, 256, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()

	d, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetMemTable([]MemoryRegion{{GuestPhysAddr: 0, Size: uint64(len(mem.Buf)), UserAddr: mem.VA(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetFeatures(virtio.Version1); err != nil {
		t.Fatal(err)
	}
	for i, q := range []*guest.Queue{rx, tx} {
		vq := uint32(i)
		desc, avail, used := q.Addrs()
		for _, err := range []error{
			d.SetVringNum(vq, uint32(q.Num)),
			d.SetVringBase(vq, 0),
			d.SetVringAddr(vq, VringAddr{Desc: desc, Avail: avail, Used: used}),
			d.SetVringKick(vq, q.Kick),
			d.SetVringCall(vq, q.Call),
			d.SetBackend(vq, tap.FD()),
		} {
			if err != nil {
				t.Fatalf("vq %d: %v", vq, err)
			}
		}
	}

	// guest -> host
	want := testFrame(1, 1000)
	if err := tx.AddOut(append(make([]byte, 12), want...)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Used(5 * time.Second); err != nil {
		t.Fatalf("TX buffer not used: %v", err)
	}
	buf := make([]byte, 4096)
	got := []byte(nil)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(sock, buf, 0)
		if err == nil && n >= 14 && binary.BigEndian.Uint16(buf[12:]) == testEtherType {
			got = append([]byte(nil), buf[:n]...)
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("host received %d bytes, want the %d-byte frame the guest sent", len(got), len(want))
	}

	// host -> guest
	for i := 0; i < 16; i++ {
		if err := rx.AddIn(); err != nil {
			t.Fatal(err)
		}
	}
	want = testFrame(2, 1200)
	if err := unix.Sendto(sock, want, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}); err != nil {
		t.Fatal(err)
	}
	got = nil
	for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); {
		b, err := rx.Used(time.Until(deadline))
		if err != nil {
			break
		}
		if len(b) >= 12+14 && binary.BigEndian.Uint16(b[12+12:]) == testEtherType {
			got = b
		}
	}
	if len(got) < 12 || !bytes.Equal(got[12:], want) {
		t.Fatalf("guest received %d bytes, want a 12-byte header and the %d-byte frame", len(got), len(want))
	}
	if got[0] != 0 || got[1] != 0 {
		t.Errorf("virtio-net header flags %#x gso_type %#x on a plain frame, want 0, 0", got[0], got[1])
	}
}
