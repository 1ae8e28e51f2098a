package macvtap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// hostSide is a packet socket on the interface where the host sees the
// backend's traffic (the tap itself, or the veth peer of the lower device).
type hostSide struct {
	fd, ifindex int
}

func openHostSide(t *testing.T, name string) hostSide {
	t.Helper()
	os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	if err := macvtap.LinkUp(name); err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol in bind: no other interface's frames queue up
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: linux.Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	return hostSide{fd, ifi.Index}
}

// sendGSO transmits a frame from the host side as one GSO packet (a
// PACKET_VNET_HDR socket), so it reaches the backend whole.
func (h hostSide) sendGSO(t *testing.T, hdr guest.NetHdr, frame []byte) {
	t.Helper()
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	unix.SetsockoptInt(s, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1)
	to := &unix.SockaddrLinklayer{Ifindex: h.ifindex, Protocol: linux.Htons(0x0800), Halen: 6}
	copy(to.Addr[:], frame[:6])
	if err := unix.Sendto(s, append(hdr.Append(nil, 10), frame...), 0, to); err != nil {
		t.Fatalf("host send: %v", err)
	}
}

// recvPayload collects the L4 payload of frames from src until want bytes
// came (one GSO frame or its segments).
func (h hostSide) recvPayload(l4hdr, want int) ([]byte, int) {
	buf := make([]byte, 128<<10)
	var got []byte
	frames := 0
	for deadline := time.Now().Add(5 * time.Second); len(got) < want && time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(h.fd, buf, 0)
		if err != nil || n < 34+l4hdr || binary.BigEndian.Uint16(buf[12:]) != 0x0800 || !bytes.Equal(buf[26:30], guest.GuestIP) {
			continue
		}
		frames++
		got = append(got, buf[34+l4hdr:n]...)
	}
	return got, frames
}

type backendCase struct {
	kind macvtap.Kind
	open func(t *testing.T) (macvtap.Backend, hostSide)
}

// TestVMEveryBackendCarriesGSO binds each backend kind to vhost-net and
// passes a 64 KiB TSO frame each way: guest to host (GSO_TCPV4 from the
// driver) and host to guest (a GSO skb into mergeable buffers).
func TestVMEveryBackendCarriesGSO(t *testing.T) {
	k := testenv.VM(t)
	testenv.Host(t)
	attrsVeth := func(t *testing.T, a string) {
		if err := vethPair(a); err != nil {
			t.Fatal(err)
		}
	}
	cases := []backendCase{
		{macvtap.KindTap, func(t *testing.T) (macvtap.Backend, hostSide) {
			tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "bktap0", VnetHdr: true})
			if err != nil {
				t.Fatal(err)
			}
			return tap, openHostSide(t, "bktap0")
		}},
		{macvtap.KindMacvtap, func(t *testing.T) (macvtap.Backend, hostSide) {
			attrsVeth(t, "bkmv")
			mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "bkmv0", Lower: "bkmv", MAC: guest.GuestMAC})
			if err != nil {
				t.Fatal(err)
			}
			return mv, openHostSide(t, "bkmvp")
		}},
		{macvtap.KindPacket, func(t *testing.T) (macvtap.Backend, hostSide) {
			attrsVeth(t, "bkpk")
			os.WriteFile("/proc/sys/net/ipv6/conf/bkpk/disable_ipv6", []byte("1"), 0)
			macvtap.LinkUp("bkpk")
			p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "bkpk", Promisc: true})
			if err != nil {
				t.Fatal(err)
			}
			return p, openHostSide(t, "bkpkp")
		}},
	}
	for _, c := range cases {
		b, host := c.open(t)
		// Packet sockets on 6.1 have only the 10-byte header: negotiate
		// without VERSION_1 and MRG_RXBUF there.
		acked := virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetGuestCsum | virtio.NetGuestTSO4
		if c.kind == macvtap.KindPacket && k.Name == "6.1" {
			acked &^= virtio.Version1 | virtio.NetMrgRxbuf
		}
		if _, err := macvtap.ApplyGuestFeatures(b, acked); err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		hdrLen := macvtap.VnetHdrSizeFor(acked)
		mem, err := guest.NewMemory(32 << 20)
		if err != nil {
			t.Fatal(err)
		}
		rxBuf := 4096
		if !acked.Has(virtio.NetMrgRxbuf) {
			rxBuf = 65536 + 64 // one big buffer per packet without mergeable buffers
		}
		rx, _ := guest.NewQueue(mem, guest.QueueConfig{Num: 256, BufSize: rxBuf, Slots: 256})
		tx, _ := guest.NewQueue(mem, guest.QueueConfig{Num: 64, BufSize: 65536 + 64})
		nic, err := vhostnet.NewNIC(vhostnet.NICConfig{Features: acked & (virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx),
			Queues: []vhostnet.QueuePair{vhostnet.NewQueuePair(rx, tx, b.QueueFD(0))},
			Memory: []vhostnet.MemoryRegion{{Size: uint64(len(mem.Buf)), UserAddr: mem.VA(0)}}})
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		// guest -> host
		payload := guest.Pattern(65535-40, byte(len(c.kind)))
		frame := guest.IPv4Frame(guest.ProtoTCP, guest.GuestIP, guest.HostIP, 40000, 5201, payload, true)
		h := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4, HdrLen: 54,
			GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
		if err := tx.AddOut(append(h.Append(nil, hdrLen), frame...)); err != nil {
			t.Fatal(err)
		}
		got, frames := host.recvPayload(20, len(payload))
		if !bytes.Equal(got, payload) {
			t.Errorf("%s on %s: host got %d of %d payload bytes in %d frames", c.kind, k.Name, len(got), len(payload), frames)
		} else {
			t.Logf("%s on %s: a 64 KiB TSO frame reached the host as %d frame(s)", c.kind, k.Name, frames)
		}
		// host -> guest
		for rx.Free() > 0 {
			rx.PushIn(rxBuf)
		}
		rx.Kick1()
		in := guest.IPv4Frame(guest.ProtoTCP, guest.HostIP, guest.GuestIP, 5201, 40000, guest.Pattern(60000, 7), true)
		copy(in[0:6], guest.GuestMAC)
		host.sendGSO(t, h, in)
		var gotIn []byte
		var gh guest.NetHdr
		for deadline := time.Now().Add(5 * time.Second); gotIn == nil && time.Now().Before(deadline); {
			var f []byte
			var err error
			if acked.Has(virtio.NetMrgRxbuf) {
				gh, f, err = rx.RecvMergeable(time.Until(deadline))
			} else {
				var el guest.Elem
				el, err = rx.Used(time.Until(deadline))
				if err == nil {
					gh, _ = guest.ParseNetHdr(el.Data, hdrLen)
					f = el.Data[hdrLen:]
				}
			}
			if err != nil {
				break
			}
			if len(f) > 34 && bytes.Equal(f[26:30], guest.HostIP) {
				gotIn = f
			}
		}
		if !bytes.Equal(gotIn, in) {
			t.Errorf("%s on %s: guest got %d bytes, want the %d-byte GSO frame whole", c.kind, k.Name, len(gotIn), len(in))
		} else if gh.GSOType != linux.VIRTIO_NET_HDR_GSO_TCPV4 {
			t.Errorf("%s on %s: header %+v, want GSO_TCPV4", c.kind, k.Name, gh)
		}
		nic.Close()
		rx.Close()
		tx.Close()
		mem.Close()
		b.Close()
	}
}

// TestVMUSOByKernel: USO is taken on 6.12 and refused on 6.1 with an error
// that names the version it needs, for tap and macvtap.
func TestVMUSOByKernel(t *testing.T) {
	k := testenv.VM(t)
	testenv.Host(t)
	if err := vethPair("usov"); err != nil {
		t.Fatal(err)
	}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "usotap", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "usomv", Lower: "usov"})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()
	uso := macvtap.OffloadCSUM | macvtap.OffloadUSO4 | macvtap.OffloadUSO6
	acked := virtio.Version1 | virtio.NetGuestCsum | virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	for _, b := range []macvtap.Backend{tap, mv} {
		sup, err := macvtap.ProbeOffloads(b.Kind())
		if err != nil {
			t.Fatal(err)
		}
		err = b.SetOffloads(uso)
		d, aerr := macvtap.ApplyGuestFeatures(b, acked)
		if aerr != nil {
			t.Fatalf("%s: %v", b.Kind(), aerr)
		}
		if n, herr := b.VnetHdrSize(); herr != nil || n != 12 {
			t.Errorf("%s on %s: header size %d (%v) after ApplyGuestFeatures, want 12", b.Kind(), k.Name, n, herr)
		}
		if k.Has("tun_uso") {
			if err != nil || sup&uso != uso || d.Offloads != uso {
				t.Errorf("%s on %s: USO refused: %v (supported %v, applied %v)", b.Kind(), k.Name, err, sup, d.Offloads)
			}
			continue
		}
		if !errors.Is(err, macvtap.ErrNotSupported) || !strings.Contains(err.Error(), "Linux 6.2") {
			t.Errorf("%s on %s: USO: %v, want ErrNotSupported naming Linux 6.2", b.Kind(), k.Name, err)
		}
		if sup&(macvtap.OffloadUSO4|macvtap.OffloadUSO6) != 0 || d.Offloads != macvtap.OffloadCSUM ||
			!strings.Contains(d.Dropped[virtio.NetGuestUSO4], "Linux 6.2") {
			t.Errorf("%s on %s: supported %v, applied %v, dropped %v", b.Kind(), k.Name, sup, d.Offloads, d.Dropped)
		}
	}
}

// TestVMPacketHeaderByKernel: a packet socket takes the 12-byte header
// (PACKET_VNET_HDR_SZ) on 6.12; 6.1 refuses it, and ApplyGuestFeatures then
// fails with ErrNotSupported and leaves the 10-byte header and the
// offloads as they were.
func TestVMPacketHeaderByKernel(t *testing.T) {
	k := testenv.VM(t)
	testenv.Host(t)
	if err := vethPair("pkhv"); err != nil {
		t.Fatal(err)
	}
	p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "pkhv", VnetHdrSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SetOffloads(macvtap.OffloadCSUM); err != nil {
		t.Fatal(err)
	}
	d, err := macvtap.ApplyGuestFeatures(p, virtio.Version1|virtio.NetGuestCsum|virtio.NetGuestTSO4)
	n, _ := p.VnetHdrSize()
	if k.Name != "6.1" {
		if err != nil || n != 12 || d.Offloads != macvtap.OffloadCSUM|macvtap.OffloadTSO4 {
			t.Errorf("on %s: %v, header %d, offloads %v; want the 12-byte header and csum|tso4", k.Name, err, n, d.Offloads)
		}
		if v, err := unix.GetsockoptInt(p.FD(), unix.SOL_PACKET, unix.PACKET_VNET_HDR_SZ); err != nil || v != 12 {
			t.Errorf("on %s: PACKET_VNET_HDR_SZ %d, %v", k.Name, v, err)
		}
		return
	}
	if !errors.Is(err, macvtap.ErrNotSupported) || !strings.Contains(err.Error(), "PACKET_VNET_HDR_SZ") {
		t.Errorf("on 6.1: %v, want ErrNotSupported naming PACKET_VNET_HDR_SZ", err)
	}
	if v, err := unix.GetsockoptInt(p.FD(), unix.SOL_PACKET, unix.PACKET_VNET_HDR); err != nil || v != 1 || n != 10 {
		t.Errorf("on 6.1: PACKET_VNET_HDR %d (%v), header %d after the refusal; want the 10-byte header kept", v, err, n)
	}
	if o := p.Offloads(); o != macvtap.OffloadCSUM {
		t.Errorf("on 6.1: offloads %v after the refusal, want csum", o)
	}
}
