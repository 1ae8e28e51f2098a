package vufront

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// stubFeatures is what vhost-net on 6.12 offers, plus bit 30 and the
// offloads a tap takes.
const stubFeatures = uint64(virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx|virtio.LogAll|virtio.NetCsum|virtio.NetGuestCsum) |
	vhostuser.FeatureProtocolFeatures

func requests(log []Recorded) string {
	var s []string
	for _, r := range log {
		s = append(s, r.Msg.Request.String())
	}
	return strings.Join(s, " ")
}

// TestFrontendHandshake: against the stub, the frontend sends QEMU's
// sequence, every message decodes (vhostuser.Decode), NEED_REPLY is set
// once REPLY_ACK is negotiated, the memory table names the memfd mapping,
// and the ring addresses lie inside it.
func TestFrontendHandshake(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vu.sock")
	stub, err := NewStub(sock, stubFeatures, vhostuser.ProtocolMQ|vhostuser.ProtocolReplyAck|vhostuser.ProtocolLogShmFD, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := Dial(ctx, sock, Config{MemSize: 4 << 20, RX: smallRing, TX: smallRing})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	acked, err := f.Negotiate(virtio.Version1|virtio.NetMrgRxbuf|virtio.NetGuestTSO4, virtio.Version1, WantProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if want := virtio.Version1 | virtio.NetMrgRxbuf | FeatureProtocol; acked != want {
		t.Errorf("acked %v, want %v", acked, want)
	}
	if f.MaxQueues() != 4 || f.HdrLen() != 12 {
		t.Errorf("max queues %d, header %d: want 4 and 12", f.MaxQueues(), f.HdrLen())
	}
	if err := f.SetupQueues(2); err != nil {
		t.Fatal(err)
	}
	if err := f.EnableLog(); err != nil {
		t.Fatal(err)
	}
	base, err := f.StopRing(1)
	if err != nil || base != 0 {
		t.Fatalf("StopRing: %d, %v", base, err)
	}
	if err := f.StartRing(1, base); err != nil {
		t.Fatal(err)
	}
	if err := f.EnableRing(3, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.StopRing(9); err == nil {
		t.Error("StopRing(9) of 2 pairs: no error")
	}
	f.Disconnect()
	// Wait for the stub to have read everything.
	log := waitLog(t, stub, func(log []Recorded) bool {
		return len(log) > 0 && log[len(log)-1].Msg.Request == vhostuser.SetVringEnable
	})
	got := requests(log)
	want := "GET_FEATURES GET_PROTOCOL_FEATURES SET_PROTOCOL_FEATURES GET_QUEUE_NUM SET_OWNER SET_FEATURES SET_MEM_TABLE" +
		strings.Repeat(" SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL", 4) +
		strings.Repeat(" SET_VRING_ENABLE", 4) + " SET_LOG_BASE SET_FEATURES" + strings.Repeat(" SET_VRING_ADDR", 4) +
		" GET_VRING_BASE SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL SET_VRING_ENABLE SET_VRING_ENABLE"
	if got != want {
		t.Errorf("requests:\n got %s\nwant %s", got, want)
	}
	lo, hi := f.Memory().VA(0), f.Memory().VA(0)+uint64(f.Memory().Len())
	for i, r := range log {
		if r.Err != nil {
			t.Errorf("message %d: %v", i, r)
		}
		needReply := r.Msg.Flags&vhostuser.FlagNeedReply != 0
		// After SET_PROTOCOL_FEATURES every message that has no reply of
		// its own asks for one.
		own := map[vhostuser.Request]bool{vhostuser.GetFeatures: true, vhostuser.GetProtocolFeatures: true,
			vhostuser.GetQueueNum: true, vhostuser.GetVringBase: true, vhostuser.SetLogBase: true, vhostuser.SetProtocolFeatures: true}
		if needReply == own[r.Msg.Request] {
			t.Errorf("message %d %v: NEED_REPLY %v", i, r, needReply)
		}
		switch b := r.Body.(type) {
		case vhostuser.MemoryTable:
			if len(b.Regions) != 1 || r.NFDs != 1 || b.Regions[0].UserAddr != lo || b.Regions[0].Size != uint64(f.Memory().Len()) {
				t.Errorf("memory table %v with %d fds, want one region at %#x of %d bytes", b.Regions, r.NFDs, lo, f.Memory().Len())
			}
		case vhostuser.VringAddr:
			for _, a := range []uint64{b.Desc, b.Avail, b.Used} {
				if a < lo || a >= hi {
					t.Errorf("ring %d address %#x outside the memory [%#x, %#x)", b.Index, a, lo, hi)
				}
			}
		}
	}
	var last Recorded
	for _, r := range log {
		if r.Msg.Request == vhostuser.SetFeatures {
			last = r
		}
	}
	if v, _ := last.Body.(vhostuser.U64); v&vhostuser.U64(virtio.LogAll) == 0 {
		t.Errorf("SET_FEATURES after SET_LOG_BASE: %v, want LOG_ALL", last)
	}
	if _, err := stub.Log(); err != nil {
		t.Error(err)
	}
}

var smallRing = guestQueue(64)

func waitLog(t *testing.T, s *Stub, ok func([]Recorded) bool) []Recorded {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := s.Changed()
		log, err := s.Log()
		if ok(log) {
			return log
		}
		if err != nil {
			t.Fatalf("stub: %v (log %v)", err, requests(log))
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("stub log: %s", requests(log))
		}
	}
}
