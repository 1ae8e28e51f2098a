package vhostnet

import (
	"bytes"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// TestVMPacketsBothWays: a frame from the driver's TX ring reaches the host
// and a frame from the host reaches the RX ring, byte for byte.
func TestVMPacketsBothWays(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1})
	want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(1000, 1), false)
	r.guestSend(0, guest.NetHdr{}, want)
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
		t.Fatalf("host received %d bytes, want the %d-byte frame the guest sent", len(got), len(want))
	}
	for i := 0; i < 16; i++ {
		r.rx[0].AddIn()
	}
	want = guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(1200, 2), false)
	r.host.Send(want)
	el, err := r.rx[0].Used(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(el.Data) < 12 || !bytes.Equal(el.Data[12:], want) {
		t.Fatalf("guest received %d bytes, want a 12-byte header and the %d-byte frame", len(el.Data), len(want))
	}
	if h, _ := guest.ParseNetHdr(el.Data, 12); h.Flags != 0 || h.GSOType != 0 {
		t.Errorf("header %+v on a plain frame, want no flags and no GSO", h)
	}
}

// TestVMTSOFrameTX: a 64 KiB TCP frame sent with GSO_TCPV4 and a partial
// checksum reaches the host intact, as one GSO frame or as segments.
func TestVMTSOFrameTX(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1, tx: guest.QueueConfig{BufSize: 4096, Slots: 1024, Indirect: true}})
	payload := guest.Pattern(65535-40, 3)
	frame := guest.IPv4Frame(6, guest.GuestIP, guest.HostIP, 40000, 5201, payload, true)
	hdr := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4,
		HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	r.guestSend(0, hdr, frame)
	var got []byte
	frames := 0
	for len(got) < len(payload) {
		f := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP))
		if f == nil {
			break
		}
		frames++
		got = append(got, f[54:]...)
		if frames == 1 && len(f) == len(frame) && !bytes.Equal(f[:34], frame[:34]) {
			t.Errorf("GSO frame headers differ:\n got % x\nwant % x", f[:54], frame[:54])
		}
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("host got %d payload bytes in %d frames, want %d", len(got), frames, len(payload))
	}
	t.Logf("a %d-byte TSO frame arrived as %d frame(s)", len(frame), frames)
}

// TestVMMergeableRXSpreadsLargeFrame: with MRG_RXBUF and a tap that takes
// TSO4 (GUEST_TSO4), a 64 KiB GSO frame from the host fills several 4 KiB
// buffers, and num_buffers says how many.
func TestVMMergeableRXSpreadsLargeFrame(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1 | virtio.NetMrgRxbuf,
		rx: guest.QueueConfig{BufSize: 4096}, tapOffload: linux.TUN_F_CSUM | linux.TUN_F_TSO4})
	for r.rx[0].Free() > 0 {
		r.rx[0].PushIn(4096)
	}
	r.rx[0].Kick1()
	// The host side sends through a PACKET_VNET_HDR socket so its frame
	// stays one GSO skb all the way to the tap.
	payload := guest.Pattern(60000, 4)
	frame := guest.IPv4Frame(6, guest.HostIP, guest.GuestIP, 5201, 40000, payload, true)
	r.host.SendGSO(guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4,
		HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}, frame)
	h, got, err := r.rx[0].RecvMergeable(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, frame) {
		t.Fatalf("guest got %d bytes, want the %d-byte frame", len(got), len(frame))
	}
	if want := (len(frame) + 12 + 4095) / 4096; int(h.NumBuffers) != want {
		t.Errorf("num_buffers %d, want %d (12+%d bytes in 4096-byte buffers)", h.NumBuffers, want, len(frame))
	}
	if h.GSOType != linux.VIRTIO_NET_HDR_GSO_TCPV4 || h.GSOSize != 1448 {
		t.Errorf("header %+v: want GSO_TCPV4 with gso_size 1448", h)
	}
}

// TestVMFourQueuePairs: a multiqueue tap with 4 queues, one vhost-net
// device each; every queue carries traffic both ways.
func TestVMFourQueuePairs(t *testing.T) {
	r := newRig(t, rigConfig{queues: 4, features: virtio.Version1})
	for q := 0; q < 4; q++ {
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, uint16(4000+q), 5000, guest.Pattern(100, byte(q)), false)
		r.guestSend(q, guest.NetHdr{}, want)
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("queue %d: host got %d bytes, want its %d-byte frame", q, len(got), len(want))
		}
		for i := 0; i < 64; i++ {
			r.rx[q].PushIn(2048)
		}
		r.rx[q].Kick1()
	}
	// The host sends 64 flows; tun spreads them over the queues by hash.
	per := r.host.Spread(r.rx, 64)
	t.Logf("RX frames per queue: %v", per)
	for q, n := range per {
		if n == 0 {
			t.Errorf("queue %d received nothing (per queue: %v)", q, per)
		}
	}
}

// TestVMEventIdxSuppressesInterrupts: with EVENT_IDX, vhost signals the
// call eventfd only once the used index passes used_event, and after
// draining TX it publishes avail_event, the index after which it wants the
// next kick.
func TestVMEventIdxSuppressesInterrupts(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1 | virtio.EventIdx,
		rx: guest.QueueConfig{EventIdx: true}, tx: guest.QueueConfig{EventIdx: true}})
	rx := r.rx[0]
	for i := 0; i < 32; i++ {
		rx.PushIn(2048)
	}
	rx.Kick1()
	send := func(n int) {
		for i := 0; i < n; i++ {
			r.host.Send(guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(100, byte(i)), false))
		}
	}
	waitUsed := func(n uint16) {
		for deadline := time.Now().Add(5 * time.Second); rx.DeviceUsedIdx() < n && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if u := rx.DeviceUsedIdx(); u != n {
			t.Fatalf("device used %d buffers, want %d", u, n)
		}
	}
	// vhost always signals its first use after the backend is attached
	// (signalled_used is not valid yet).
	send(1)
	waitUsed(1)
	if !rx.WaitInterrupt(5 * time.Second) {
		t.Fatal("no interrupt for the first used buffer")
	}
	rx.SetUsedEvent(5) // interrupt once entry 5 is used, i.e. at used index 6
	send(3)
	waitUsed(4)
	time.Sleep(100 * time.Millisecond)
	if n := rx.TakeInterrupts(); n != 0 {
		t.Errorf("%d interrupts at used index 4 with used_event 5, want none", n)
	}
	send(2)
	waitUsed(6)
	if !rx.WaitInterrupt(5 * time.Second) {
		t.Errorf("no interrupt once the used index passed used_event")
	}

	tx := r.tx[0]
	for i := 0; i < 3; i++ {
		f := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5000, guest.Pattern(100, byte(i)), false)
		r.guestSend(0, guest.NetHdr{}, f)
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, f) {
			t.Fatalf("TX frame %d did not arrive", i)
		}
	}
	for deadline := time.Now().Add(2 * time.Second); tx.AvailEvent() != 3 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if ae := tx.AvailEvent(); ae != 3 {
		t.Errorf("TX avail_event %d after vhost drained 3 frames, want 3", ae)
	}
	t.Logf("TX: %d kicks, %d suppressed; RX: %d interrupts", tx.Kicks, tx.KicksSuppressed, rx.Interrupts)
}

// TestVMDirtyLog: with LOG_ALL and a log base, vhost sets the log bit of
// every guest page it writes: the RX buffer and the used ring.
func TestVMDirtyLog(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1 | virtio.LogAll, logAll: true})
	rx := r.rx[0]
	rx.AddIn()
	r.host.Send(guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4000, guest.Pattern(500, 9), false))
	if _, err := rx.Used(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	bit := func(gpa uint64) bool { p := gpa / 4096; return r.logBuf[p/8]&(1<<(p%8)) != 0 }
	// The first buffer posted is slot 0.
	for name, gpa := range map[string]uint64{"RX buffer": rx.BufGPA(0), "used ring": rx.UsedGPA()} {
		if !bit(gpa) {
			t.Errorf("no dirty bit for the %s page (gpa %#x)", name, gpa)
		}
	}
	set := 0
	for _, b := range r.logBuf {
		for ; b != 0; b &= b - 1 {
			set++
		}
	}
	if set < 2 {
		t.Errorf("%d dirty pages logged, want at least the buffer's and the used ring's", set)
	}
}

// TestVMStopRestartKeepsPosition: Stop detaches the backends and reads each
// ring's position; Start resumes there, and traffic continues.
func TestVMStopRestartKeepsPosition(t *testing.T) {
	r := newRig(t, rigConfig{features: virtio.Version1})
	send := func(seq int) {
		f := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, uint16(5000+seq), guest.Pattern(200, byte(seq)), false)
		r.guestSend(0, guest.NetHdr{}, f)
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, f) {
			t.Fatalf("frame %d did not arrive", seq)
		}
	}
	for i := 0; i < 3; i++ {
		send(i)
	}
	if err := r.nic.Stop(); err != nil {
		t.Fatal(err)
	}
	if b := r.nic.Bases()[0]; b[1] != 3 || b[0] != 0 {
		t.Errorf("bases after 3 TX frames: RX %d TX %d, want 0 and 3", b[0], b[1])
	}
	// While stopped, a frame made available is not sent.
	f := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5999, guest.Pattern(200, 99), false)
	r.guestSend(0, guest.NetHdr{}, f)
	if got := r.host.Recv(300*time.Millisecond, hostside.From(guest.GuestIP)); got != nil {
		t.Fatal("a frame went out while the NIC was stopped")
	}
	if err := r.nic.Start(); err != nil {
		t.Fatal(err)
	}
	r.tx[0].Notify()
	if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, f) {
		t.Fatal("the frame queued while stopped did not go out after Start")
	}
	send(4)
	r.nic.Stop()
	if b := r.nic.Bases()[0]; b[1] < 5 {
		t.Errorf("TX base after restart and more traffic: %d, want at least 5", b[1])
	}
}
