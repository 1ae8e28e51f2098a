package vufront

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vhostrig/hostside"
	"github.com/netctl/netctl/vhostnet/guest"
	"github.com/netctl/netctl/virtio"
)

// TestVMBridge drives the vhost-user bridge (vhostuser.Bridge onto kernel
// vhost-net over a tap) with this package's frontend, then with QEMU as
// the frontend; one VM boot, one subtest per property of issue 15.
func TestVMBridge(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)

	t.Run("offers", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		off := f.Offered()
		t.Logf("kernel %s: the bridge offers %v; protocol %v; acked %v", k.Name, off, f.ProtocolOffered(), f.Acked())
		for _, b := range []virtio.Features{virtio.Version1, virtio.NetMrgRxbuf, virtio.LogAll, FeatureProtocol,
			virtio.NetCsum, virtio.NetHostTSO4, virtio.NetGuestTSO4} {
			if !off.Has(b) {
				t.Errorf("offer %v lacks %v", off, b)
			}
		}
		// USO: the tap takes it from 6.2 on; the offer follows the tap.
		if uso := virtio.NetHostUSO | virtio.NetGuestUSO4 | virtio.NetGuestUSO6; k.Has("tun_uso") {
			if !off.Has(uso) {
				t.Errorf("kernel %s (tun with USO): offer %v lacks %v", k.Name, off, uso)
			}
		} else if off&uso != 0 {
			t.Errorf("kernel %s (tun without USO): offer %v has %v", k.Name, off, off&uso)
		}
		if off.Has(virtio.AccessPlatform) {
			t.Errorf("offer %v has ACCESS_PLATFORM, which needs an IOTLB channel", off)
		}
	})

	t.Run("frames_both_ways", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		for i := 0; i < 8; i++ {
			r.guestToHost(f, 0, i)
			r.hostToGuest(f, 0, i)
		}
	})

	t.Run("tso_64k", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{TX: guest.QueueConfig{BufSize: 4096, Slots: 512, Indirect: true}})
		payload := guest.Pattern(65535-40, 3)
		frame := guest.IPv4Frame(6, guest.GuestIP, guest.HostIP, 40000, 5201, payload, true)
		hdr := guest.NetHdr{Flags: linux.VIRTIO_NET_HDR_F_NEEDS_CSUM, GSOType: linux.VIRTIO_NET_HDR_GSO_TCPV4,
			HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
		if err := f.Send(0, hdr, frame); err != nil {
			t.Fatal(err)
		}
		var got []byte
		frames := 0
		for len(got) < len(payload) {
			fr := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP))
			if fr == nil {
				break
			}
			frames++
			got = append(got, fr[54:]...)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("guest to host: %d payload bytes in %d frames, want %d", len(got), frames, len(payload))
		}
		t.Logf("guest to host: a %d-byte TSO frame arrived as %d frame(s)", len(frame), frames)
		// Host to guest: one GSO skb into 4 KiB mergeable buffers; the
		// bridge set the tap's offloads from GUEST_CSUM|GUEST_TSO4.
		payload = guest.Pattern(60000, 4)
		frame = guest.IPv4Frame(6, guest.HostIP, guest.GuestIP, 5201, 40000, payload, true)
		r.host.SendGSO(hdr, frame)
		h, rx, err := f.Recv(0, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rx, frame) {
			t.Fatalf("host to guest: %d bytes, want the %d-byte GSO frame", len(rx), len(frame))
		}
		if h.GSOType != linux.VIRTIO_NET_HDR_GSO_TCPV4 || h.GSOSize != 1448 || h.NumBuffers < 2 {
			t.Errorf("host to guest: header %+v, want GSO_TCPV4, gso_size 1448, several buffers", h)
		}
	})

	t.Run("four_queue_pairs", func(t *testing.T) {
		r := newBridgeRig(t, 4)
		f := r.connect(4, Config{})
		// GET_QUEUE_NUM counts virtqueues (2 per pair), as libvhost-user,
		// passt and Cloud Hypervisor do; QEMU takes it as a bound on pairs.
		if f.MaxQueues() != 8 || !f.Acked().Has(virtio.NetMQ) {
			t.Errorf("GET_QUEUE_NUM %d, acked %v: want 8 (4 pairs' virtqueues) and MQ", f.MaxQueues(), f.Acked())
		}
		for q := 0; q < 4; q++ {
			r.guestToHost(f, q, q)
		}
		// 64 flows from the host: tun spreads them over its queues by
		// hash, each queue into its own pair's RX ring.
		var rx []*guest.Queue
		for _, p := range f.Pairs() {
			rx = append(rx, p.RX)
		}
		per := r.host.Spread(rx, 64)
		t.Logf("RX frames per pair: %v", per)
		for q, n := range per {
			if n == 0 {
				t.Errorf("pair %d received nothing (per pair: %v)", q, per)
			}
		}
	})

	t.Run("ring_enable_disable", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		r.guestToHost(f, 0, 0)
		if err := f.EnableRing(1, false); err != nil {
			t.Fatal(err)
		}
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5999, guest.Pattern(200, 77), false)
		if err := f.Send(0, guest.NetHdr{}, want); err != nil {
			t.Fatal(err)
		}
		if got := r.host.Recv(500*time.Millisecond, hostside.From(guest.GuestIP)); got != nil {
			t.Fatal("a frame went out on a disabled TX ring")
		}
		if err := f.EnableRing(1, true); err != nil {
			t.Fatal(err)
		}
		f.Pairs()[0].TX.Notify()
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("after SET_VRING_ENABLE 1: the host got %d bytes, want the frame queued while disabled", len(got))
		}
		// RX disabled: the tap holds what the host sends; enabling the
		// ring delivers it.
		if err := f.EnableRing(0, false); err != nil {
			t.Fatal(err)
		}
		want = guest.IPv4Frame(17, guest.HostIP, guest.GuestIP, 5000, 4999, guest.Pattern(200, 78), false)
		r.host.Send(want)
		if _, _, err := f.Recv(0, 500*time.Millisecond); err == nil {
			t.Fatal("a frame arrived on a disabled RX ring")
		}
		if err := f.EnableRing(0, true); err != nil {
			t.Fatal(err)
		}
		_, got, err := f.Recv(0, 5*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after enabling RX: %d bytes, %v; want the frame the tap held", len(got), err)
		}
		r.guestToHost(f, 0, 1)
		r.hostToGuest(f, 0, 2)
	})

	t.Run("stop_restart_keeps_position", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		for i := 0; i < 3; i++ {
			r.guestToHost(f, 0, i)
		}
		base, err := f.StopRing(1)
		if err != nil {
			t.Fatal(err)
		}
		if base != 3 {
			t.Errorf("GET_VRING_BASE of TX after 3 frames: %d, want 3", base)
		}
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5998, guest.Pattern(200, 99), false)
		if err := f.Send(0, guest.NetHdr{}, want); err != nil {
			t.Fatal(err)
		}
		if got := r.host.Recv(500*time.Millisecond, hostside.From(guest.GuestIP)); got != nil {
			t.Fatal("a frame went out on a stopped ring")
		}
		if err := f.StartRing(1, base); err != nil {
			t.Fatal(err)
		}
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("after restart at %d: the host got %d bytes, want the frame queued while stopped", base, len(got))
		}
		r.guestToHost(f, 0, 4)
		if base, err = f.StopRing(1); err != nil || base != 5 {
			t.Errorf("GET_VRING_BASE after restart and 2 more frames: %d, %v; want 5", base, err)
		}
		rxBase, err := f.StopRing(0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.StartRing(0, rxBase); err != nil {
			t.Fatal(err)
		}
		if err := f.StartRing(1, base); err != nil {
			t.Fatal(err)
		}
		r.hostToGuest(f, 0, 5)
		r.guestToHost(f, 0, 6)
	})

	t.Run("dirty_log", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		if f.Acked().Has(virtio.LogAll) {
			t.Fatalf("LOG_ALL acked before EnableLog: %v", f.Acked())
		}
		if err := f.EnableLog(); err != nil {
			t.Fatal(err)
		}
		rx, tx := f.Pairs()[0].RX, f.Pairs()[0].TX
		if n := f.DirtyPages(); n != 0 {
			t.Fatalf("%d pages dirty before vhost wrote anything", n)
		}
		r.hostToGuest(f, 0, 0)
		// vhost wrote the frame into RX buffer 0 and an entry into the RX
		// used ring; the driver wrote the rest (not logged: only vhost's
		// writes are).
		pages := map[uint64]string{rx.UsedGPA() / logPage: "RX used ring", rx.BufGPA(0) / logPage: "RX buffer 0"}
		for p, what := range pages {
			if !f.Dirty(p * logPage) {
				t.Errorf("no dirty bit for page %d (%s), which vhost wrote", p, what)
			}
		}
		if n := f.DirtyPages(); n != len(pages) {
			t.Errorf("%d dirty pages, want %d (%v)", n, len(pages), pages)
		}
		r.guestToHost(f, 0, 1)
		if !f.Dirty(tx.UsedGPA()) {
			t.Errorf("no dirty bit for the TX used ring's page (gpa %#x) after vhost used a TX buffer", tx.UsedGPA())
		}
		if f.Dirty(tx.BufGPA(0)) && tx.BufGPA(0)/logPage != tx.UsedGPA()/logPage {
			t.Errorf("the page of TX buffer 0 is dirty, but vhost only read it")
		}
		n := f.DirtyPages()
		t.Logf("%d dirty pages after one frame each way", n)
	})

	t.Run("disconnect_reconnect", func(t *testing.T) {
		r := newBridgeRig(t, 2)
		fds0, maps0 := resources(t)
		f := r.connect(2, Config{})
		r.guestToHost(f, 1, 0)
		fds1, maps1 := resources(t)
		if maps1 != maps0+2 {
			t.Errorf("memfd mappings with a frontend connected: %d, want %d (the frontend's and the bridge's)", maps1, maps0+2)
		}
		t.Logf("fds: %d idle, %d with a frontend", fds0, fds1)
		f.Close()
		waitResources(t, fds0, maps0)
		for i := 0; i < 3; i++ {
			f = r.connect(2, Config{})
			r.guestToHost(f, 0, 10+i)
			r.guestToHost(f, 1, 20+i)
			r.hostToAny(f, 30+i)
			f.Close()
			waitResources(t, fds0, maps0)
		}
	})

	t.Run("bridge_restart", func(t *testing.T) {
		r := newBridgeRig(t, 1)
		f := r.connect(1, Config{})
		r.guestToHost(f, 0, 0)
		r.hostToGuest(f, 0, 1)
		r.stop()
		// The bridge is gone: a frame sent now waits in the ring.
		want := guest.IPv4Frame(17, guest.GuestIP, guest.HostIP, 4000, 5997, guest.Pattern(200, 55), false)
		if err := f.Send(0, guest.NetHdr{}, want); err != nil {
			t.Fatal(err)
		}
		if got := r.host.Recv(300*time.Millisecond, hostside.From(guest.GuestIP)); got != nil {
			t.Fatal("a frame went out with no bridge")
		}
		r.start()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.Reconnect(ctx, wantFeatures, virtio.Version1|virtio.NetMrgRxbuf, WantProtocol); err != nil {
			t.Fatal(err)
		}
		if got := r.host.Recv(5*time.Second, hostside.From(guest.GuestIP)); !bytes.Equal(got, want) {
			t.Fatalf("after the bridge restarted: the host got %d bytes, want the frame queued meanwhile", len(got))
		}
		for i := 2; i < 6; i++ {
			r.guestToHost(f, 0, i)
			r.hostToGuest(f, 0, i)
		}
	})

	t.Run("bridge_process_restart", processRestart)

	t.Run("qemu_frontend_dhcp", qemuFrontendDHCP)
}
