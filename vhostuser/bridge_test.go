package vhostuser

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

type rig struct {
	b    *Bridge
	k    *fakeKernel
	tap  *fakeTap
	path string
	stop func() error
}

func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startBridge serves a bridge on a fake kernel and a fake tap.
func startBridge(t *testing.T, queues int, mod func(*Config)) *rig {
	t.Helper()
	r := &rig{k: newFakeKernel(), tap: newFakeTap(queues), path: filepath.Join(socketDir(t), "vu.sock")}
	t.Cleanup(func() { r.tap.Close() })
	cfg := Config{Socket: r.path, Backend: r.tap, Queues: queues, Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6,
		OpenVhost: r.k.open, MaxMemSlots: 16}
	if mod != nil {
		mod(&cfg)
	}
	r2 := startBridgeWith(t, cfg)
	r.b, r.stop = r2.b, r2.stop
	return r
}

// startBridgeUnserved makes a bridge on a fake kernel and tap, for a test
// to set up before r.serve.
func startBridgeUnserved(t *testing.T, queues int) *rig {
	t.Helper()
	r := &rig{k: newFakeKernel(), tap: newFakeTap(queues), path: filepath.Join(socketDir(t), "vu.sock")}
	t.Cleanup(func() { r.tap.Close() })
	b, err := NewBridge(Config{Socket: r.path, Backend: r.tap, Queues: queues, OpenVhost: r.k.open,
		Offloads: macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6})
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	return r
}

// startBridgeWith serves a bridge made from cfg until the test ends.
func startBridgeWith(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{path: cfg.Socket}
	b, err := NewBridge(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	r.serve(t)
	return r
}

// serve runs r.b.Serve until the test ends.
func (r *rig) serve(t *testing.T) {
	b := r.b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	stopped := false
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		return errors.Join(err, b.Close())
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	})
}

// waitIdle waits until no front-end is connected and n sessions were
// served.
func (r *rig) waitIdle(t *testing.T, sessions int) {
	t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st := r.b.Status(); !st.Connected && st.Sessions >= sessions {
			return
		}
	}
	t.Fatalf("the bridge did not become idle: %+v", r.b.Status())
}

func TestBridgeHandshake(t *testing.T) {
	r := startBridge(t, 2, nil)
	f := dialFrontend(t, r.path) // its memfd and eventfd are the test's, counted in fds0
	fds0, maps0 := resources(t)
	acked := f.handshake(2)

	// Every ring runs on its queue pair's device, with the tap queue of
	// that pair, addresses translated into the bridge's mapping.
	for qp := 0; qp < 2; qp++ {
		d := r.k.dev(qp)
		if d.features != acked&(virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx) {
			t.Errorf("device %d features %v, want only the ring bits of %v", qp, d.features, acked)
		}
		if len(d.table) != 1 || d.table[0].GuestPhysAddr != 0 || d.table[0].Size != testMemSize || d.table[0].UserAddr == testUaddr {
			t.Errorf("device %d memory table %+v: want gpa 0, the region's size, this process's address", qp, d.table)
		}
		for idx := 0; idx < 2; idx++ {
			v := d.vr[idx]
			q := uint32(2*qp + idx)
			if v.backend != r.tap.QueueFD(qp) {
				t.Errorf("ring %d: backend %d, want tap queue %d's fd %d", q, v.backend, qp, r.tap.QueueFD(qp))
			}
			want := d.table[0].UserAddr + (f.ringAddr(q).Desc - testUaddr)
			if v.addr == nil || v.addr.Desc != want || v.num != testRingNum || v.kick < 0 || v.call < 0 || v.errfd < 0 {
				t.Errorf("ring %d: %+v, want desc %#x, num %d and eventfds", q, v, want, testRingNum)
			}
		}
	}
	if err := checkMapping(d0addr(r), "memfd:vu-test"); err != nil {
		t.Error(err)
	}
	if hdr, _ := r.tap.VnetHdrSize(); hdr != 12 {
		t.Errorf("tap header %d bytes, want 12 (VERSION_1)", hdr)
	}
	if o := r.tap.Offloads(); o != macvtap.OffloadCSUM|macvtap.OffloadTSO4 {
		t.Errorf("tap offloads %v, want csum|tso4 (what the guest acknowledged)", o)
	}
	st := r.b.Status()
	if !st.Connected || st.FrontendPID != os.Getpid() || len(st.Rings) != 4 || !st.Rings[3].Attached {
		t.Errorf("status %+v", st)
	}

	// GET_VRING_BASE stops the ring (backend detached) before reading.
	// SET_VRING_BASE on a running ring: detached, set, attached again.
	f.must(SetVringBase, VringState{Index: 2, Num: 7})
	if d := r.k.dev(1); d.vr[0].base != 7 || d.vr[0].backend < 0 {
		t.Errorf("ring 2 after SET_VRING_BASE 7: %+v", d.vr[0])
	}
	before := len(r.k.callLog())
	rep := f.get(GetVringBase, VringState{Index: 1})
	if s := decodeVringState(rep); s.Index != 1 || s.Num != 0 {
		t.Errorf("GET_VRING_BASE reply %+v", s)
	}
	calls := r.k.callLog()[before:]
	if strings.Join(calls, " ") != "0:SetBackend(1,-1) 0:VringBase(1)" {
		t.Errorf("GET_VRING_BASE made calls %v, want the detach, then the read", calls)
	}
	if r.k.dev(0).vr[1].backend != -1 {
		t.Error("ring 1 still attached after GET_VRING_BASE")
	}
	// A kick starts it again.
	f.must(SetVringKick, RingFile{Index: 1}, f.efd)
	if r.k.dev(0).vr[1].backend < 0 {
		t.Error("ring 1 not attached again after its kick")
	}
	// Disabling detaches; enabling attaches.
	f.must(SetVringEnable, VringState{Index: 0, Num: 0})
	if r.k.dev(0).vr[0].backend != -1 {
		t.Error("ring 0 attached while disabled")
	}
	f.must(SetVringEnable, VringState{Index: 0, Num: 1})
	if r.k.dev(0).vr[0].backend < 0 {
		t.Error("ring 0 not attached after enable")
	}

	f.c.Close()
	r.waitIdle(t, 1)
	for qp := 0; qp < 2; qp++ {
		if d := r.k.dev(qp); d.owner || d.table != nil || d.vr[0].backend != -1 || d.vr[0].kick != -1 {
			t.Errorf("device %d not reset after the front-end left: %+v", qp, d)
		}
	}
	if fds, maps := resources(t); fds > fds0 || maps != maps0 {
		t.Errorf("after the front-end left: %d fds and %d memfd mappings, before it came %d and %d", fds, maps, fds0, maps0)
	}
	// Reconnect: a fresh handshake on the same devices.
	f2 := dialFrontend(t, r.path)
	f2.handshake(2)
	if d := r.k.dev(1); d.vr[1].backend != r.tap.QueueFD(1) {
		t.Errorf("after reconnecting, ring 3 has backend %d", d.vr[1].backend)
	}
}

func d0addr(r *rig) uint64 { return r.k.dev(0).table[0].UserAddr }

// checkMapping checks that addr lies in a mapping of this process whose
// path contains name.
func checkMapping(addr uint64, name string) error {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var lo, hi uint64
		if _, err := fmtSscanf(line, &lo, &hi); err != nil {
			continue
		}
		if addr >= lo && addr < hi {
			if strings.Contains(line, name) {
				return nil
			}
			return errors.New("address in mapping " + line + ", not " + name)
		}
	}
	return errors.New("address not mapped")
}

func TestBridgeNoProtocolFeatures(t *testing.T) {
	// Without bit 30 acknowledged, rings start enabled (the spec) and run
	// once they have a kick.
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.must(SetOwner, nil)
	f.get(GetFeatures, nil)
	f.must(SetFeatures, U64(virtio.Version1))
	f.must(SetMemTable, f.table(), f.mem)
	for q := uint32(0); q < 2; q++ {
		f.must(SetVringNum, VringState{Index: q, Num: testRingNum})
		f.must(SetVringAddr, f.ringAddr(q))
		f.must(SetVringKick, RingFile{Index: q}, f.efd)
	}
	f.get(GetFeatures, nil) // a round trip: every message before it was handled
	if d := r.k.dev(0); d.vr[0].backend < 0 || d.vr[1].backend < 0 {
		t.Errorf("rings not running without protocol features: %+v", d.vr)
	}
}

func TestBridgeSecondFrontendRefused(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.get(GetFeatures, nil)
	g := dialFrontend(t, r.path)
	g.expectClosed()
	if st := r.b.Status(); st.Refused != 1 || !st.Connected {
		t.Errorf("status %+v: want one refusal and the first front-end still connected", st)
	}
	f.get(GetFeatures, nil) // the first is still served
	f.c.Close()
	r.waitIdle(t, 1)
	h := dialFrontend(t, r.path)
	h.handshake(1)
}

// TestBridgeReconnectAtOnce: a front-end that hangs up and dials again at
// once (QEMU's reconnect=) is served, not refused, although its old
// session may still be tearing down; make test caught the refusal as a
// broken pipe in the VM. Repeated, so the race is met both ways.
func TestBridgeReconnectAtOnce(t *testing.T) {
	r := startBridge(t, 1, nil)
	for i := 0; i < 50; i++ {
		f := dialFrontend(t, r.path)
		f.handshake(1)
		f.c.Close()
	}
	f := dialFrontend(t, r.path)
	f.handshake(1)
	if st := r.b.Status(); st.Refused != 0 {
		t.Errorf("status %+v: a front-end that came back at once was refused", st)
	}
}

func TestBridgeRestart(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.handshake(1)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	f.expectClosed()
	if _, err := os.Lstat(r.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
	// A new bridge on the same path; the front-end reconnects.
	k := newFakeKernel()
	b, err := NewBridge(Config{Socket: r.path, Backend: r.tap, OpenVhost: k.open})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	g := dialFrontend(t, r.path)
	g.handshake(1)
	cancel()
	if err := errors.Join(<-done, b.Close()); err != nil {
		t.Fatal(err)
	}
}

func TestBridgeSocket(t *testing.T) {
	dir := socketDir(t)
	tap := newFakeTap(1)
	defer tap.Close()
	k := newFakeKernel()
	path := filepath.Join(dir, "s")
	// A stale socket (nobody listening) is replaced.
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	b, err := NewBridge(Config{Socket: path, Backend: tap, OpenVhost: k.open})
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %v mode %v, want a socket with mode 0600", err, fi.Mode())
	}
	// A live one is refused, and so is a second bridge on it.
	if _, err := NewBridge(Config{Socket: path, Backend: tap, OpenVhost: k.open}); !errors.Is(err, ErrBusy) {
		t.Errorf("second bridge on a live socket: %v, want ErrBusy", err)
	}
	b.Close()
	// A regular file is not replaced.
	os.WriteFile(path, nil, 0o600)
	if _, err := NewBridge(Config{Socket: path, Backend: tap, OpenVhost: k.open}); !errors.Is(err, ErrConflict) {
		t.Errorf("a file at the path: %v, want ErrConflict", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries after the refusals, want only the file", len(ents))
	}
	// Bad configs change nothing.
	for name, c := range map[string]Config{
		"no socket":  {Backend: tap, OpenVhost: k.open},
		"no backend": {Socket: path + "2", OpenVhost: k.open},
		"queues":     {Socket: path + "2", Backend: tap, Queues: 2, OpenVhost: k.open},
		"profile":    {Socket: path + "2", Backend: tap, Profile: "fast", OpenVhost: k.open},
	} {
		if _, err := NewBridge(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestOfferedFeatures(t *testing.T) {
	all := macvtap.OffloadAll
	f := offerFeatures(fakeVhostOffers, all, 2, ProfileThroughput)
	for _, want := range []virtio.Features{virtio.Version1, virtio.NetMrgRxbuf, virtio.EventIdx, virtio.LogAll,
		virtio.NetCsum, virtio.NetGuestCsum, virtio.NetGuestTSO4, virtio.NetHostTSO6, virtio.NetGuestUSO4, virtio.NetHostUSO,
		virtio.NetMQ, virtio.NetCtrlVQ, virtio.AnyLayout, virtio.Features(FeatureProtocolFeatures)} {
		if !f.Has(want) {
			t.Errorf("offer %v lacks %v", f, want)
		}
	}
	for _, not := range []virtio.Features{virtio.AccessPlatform, virtio.RingReset, virtio.NetMTU} {
		if f.Has(not) {
			t.Errorf("offer %v has %v", f, not)
		}
	}
	if c := offerFeatures(fakeVhostOffers, all, 1, ProfileCompat); c.Has(virtio.NetGuestUFO) || c.Has(virtio.NetGuestUSO4) || !c.Has(virtio.NetGuestTSO6) || c.Has(virtio.NetMQ) || c.Has(virtio.NetCtrlVQ) {
		t.Errorf("compat offer %v", c)
	}
	if n := offerFeatures(fakeVhostOffers, macvtap.OffloadTSO4, 1, ProfileThroughput); n.Has(virtio.NetGuestTSO4) {
		t.Errorf("TSO offered without checksum: %v", n)
	}
	if v := vhostFeatures(f, fakeVhostOffers); v != virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx|virtio.LogAll|virtio.NotifyOnEmpty|virtio.IndirectDesc {
		t.Errorf("vhost gets %v", v)
	}
}

// TestBridgeReplyAckOnSetProtocolFeatures: a front-end that negotiates
// REPLY_ACK with NEED_REPLY on SET_PROTOCOL_FEATURES itself gets its ack.
func TestBridgeReplyAckOnSetProtocolFeatures(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.get(GetFeatures, nil)
	if err := f.send(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolMQ), FlagNeedReply); err != nil {
		t.Fatal(err)
	}
	f.proto = ProtocolReplyAck | ProtocolMQ
	f.must(SetOwner, nil)
}

// TestBridgeSendRARP: with RARP negotiated, SEND_RARP writes the
// announcement, after a zero header of the tap's size, to the tap's first
// queue; a multicast MAC is refused.
func TestBridgeSendRARP(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.get(GetFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolRARP))
	f.proto = ProtocolReplyAck | ProtocolRARP
	f.must(SetFeatures, U64(virtio.Version1|virtio.Features(FeatureProtocolFeatures)))
	mac := []byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	var v [8]byte
	copy(v[:], mac)
	f.must(SendRARP, U64(binary.LittleEndian.Uint64(v[:])))
	buf := make([]byte, 256)
	n, err := unix.Read(r.tap.peers[0], buf)
	if err != nil {
		t.Fatal(err)
	}
	want := append(make([]byte, 12), rarpFrame(mac)...)
	if !bytes.Equal(buf[:n], want) {
		t.Errorf("the tap got % x\nwant % x", buf[:n], want)
	}
	if !bytes.Equal(want[12+6:12+12], mac) || want[12+12] != 0x80 || want[12+13] != 0x35 {
		t.Errorf("frame % x: want the MAC as source and ethertype 0x8035", want)
	}
	v[0] |= 1
	f.refused(SendRARP, U64(binary.LittleEndian.Uint64(v[:])))
}
