package vufront

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/test/l2"
	"github.com/netctl/netctl/vhostuser"
	"github.com/netctl/netctl/virtio"
)

// TestHostQEMUHandshake: QEMU 7.2 as the frontend (a firmware-only guest
// whose iPXE drives a vhost-user virtio-net NIC with 2 queue pairs) against
// the Stub. It checks what the bridge relies on: QEMU's order (features,
// protocol features, queue count, owner), per-ring CALL and ERR before
// SET_FEATURES and SET_MEM_TABLE, NEED_REPLY on SET_MEM_TABLE once
// REPLY_ACK is acked, one fd per region, ring addresses inside a region's
// user addresses, and that every message decodes (vhostuser.Decode).
// With NETCTL_VUFRONT_SEEDS=DIR it writes each message there as a fuzz
// seed for vhostuser (kept in testdata/qemu-7.2-handshake).
func TestHostQEMUHandshake(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "vu.sock")
	features := uint64(virtio.Version1|virtio.NetMrgRxbuf|virtio.EventIdx|virtio.LogAll|virtio.IndirectDesc) | vhostuser.FeatureProtocolFeatures
	stub, err := NewStub(sock, features, vhostuser.ProtocolMQ|vhostuser.ProtocolReplyAck|vhostuser.ProtocolLogShmFD, 2)
	if err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x05}
	g, err := l2.StartFirmware(ctx, l2.Firmware{Dir: dir, SharedMemory: true, Extra: QEMUNIC("net1", sock, 2, mac)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
		if err := stub.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("QEMU: %s", g.Stderr())
		}
	}()
	// QMP answers only after the netdev's handshake: QEMU waits for it.
	c, err := qmp.Dial(ctx, g.QMP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before, _ := stub.Log()
	t.Logf("before cont: %s", requests(before))
	if _, err := c.Execute(ctx, "cont", nil); err != nil {
		t.Fatal(err)
	}
	// iPXE sets DRIVER_OK: QEMU starts vhost on pair 0 and kicks off its rings.
	started := func(log []Recorded) bool {
		for _, r := range log {
			if f, ok := r.Body.(vhostuser.RingFile); ok && r.Msg.Request == vhostuser.SetVringKick && f.Index == 1 {
				return true
			}
		}
		return false
	}
	log := waitLog(t, stub, started)
	t.Logf("%d messages: %s", len(log), requests(log))
	if dir := os.Getenv("NETCTL_VUFRONT_SEEDS"); dir != "" {
		if err := stub.WriteSeeds(dir); err != nil {
			t.Error(err)
		}
	}
	checkQEMUHandshake(t, log, features)
}

func checkQEMUHandshake(t *testing.T, log []Recorded, features uint64) {
	t.Helper()
	first := []vhostuser.Request{vhostuser.GetFeatures, vhostuser.GetProtocolFeatures, vhostuser.SetProtocolFeatures,
		vhostuser.GetQueueNum, vhostuser.SetOwner}
	for i, want := range first {
		if i >= len(log) || log[i].Msg.Request != want {
			t.Fatalf("message %d: want %v; log %s", i, want, requests(log))
		}
	}
	var proto vhostuser.ProtocolFeatures
	if v, ok := log[2].Body.(vhostuser.U64); ok {
		proto = vhostuser.ProtocolFeatures(v)
	}
	t.Logf("QEMU acked protocol features %v", proto)
	if !proto.Has(vhostuser.ProtocolMQ | vhostuser.ProtocolReplyAck | vhostuser.ProtocolLogShmFD) {
		t.Errorf("QEMU acked protocol %v, want MQ|LOG_SHMFD|REPLY_ACK", proto)
	}
	var setFeatures, memTable int = -1, -1
	var regions []vhostuser.MemRegion
	earlyCall, earlyErr := map[uint32]bool{}, map[uint32]bool{}
	enabled := map[uint32]bool{}
	for i, r := range log {
		if r.Err != nil {
			t.Errorf("message %d %v does not decode", i, r)
			continue
		}
		switch b := r.Body.(type) {
		case vhostuser.RingFile:
			if setFeatures < 0 && r.Msg.Request == vhostuser.SetVringCall {
				earlyCall[b.Index] = true
			}
			if setFeatures < 0 && r.Msg.Request == vhostuser.SetVringErr {
				earlyErr[b.Index] = true
			}
		case vhostuser.U64:
			if r.Msg.Request == vhostuser.SetFeatures && setFeatures < 0 {
				setFeatures = i
				if uint64(b)&^features != 0 {
					t.Errorf("SET_FEATURES %#x acks bits not offered (%#x)", uint64(b), features)
				}
				t.Logf("SET_FEATURES %v", virtio.Features(b))
			}
		case vhostuser.MemoryTable:
			memTable, regions = i, b.Regions
			if r.NFDs != len(b.Regions) {
				t.Errorf("SET_MEM_TABLE: %d regions, %d fds", len(b.Regions), r.NFDs)
			}
			if r.Msg.Flags&vhostuser.FlagNeedReply == 0 {
				t.Errorf("SET_MEM_TABLE without NEED_REPLY although REPLY_ACK was acked")
			}
			for _, reg := range b.Regions {
				t.Logf("region %v", reg)
			}
		case vhostuser.VringAddr:
			in := func(a uint64) bool {
				for _, reg := range regions {
					if a >= reg.UserAddr && a-reg.UserAddr < reg.Size {
						return true
					}
				}
				return false
			}
			if !in(b.Desc) || !in(b.Avail) || !in(b.Used) {
				t.Errorf("SET_VRING_ADDR %+v: an address outside every region %v", b, regions)
			}
		case vhostuser.VringState:
			if r.Msg.Request == vhostuser.SetVringEnable && b.Num == 1 {
				enabled[b.Index] = true
			}
		}
	}
	if setFeatures < 0 || memTable < setFeatures {
		t.Errorf("SET_FEATURES at %d, SET_MEM_TABLE at %d: want both, features first", setFeatures, memTable)
	}
	for q := uint32(0); q < 4; q++ {
		if !earlyCall[q] || !earlyErr[q] {
			t.Errorf("ring %d: SET_VRING_CALL %v, SET_VRING_ERR %v before SET_FEATURES; want both (QEMU 7.2's vhost_dev_init)", q, earlyCall[q], earlyErr[q])
		}
	}
	if !enabled[0] || !enabled[1] {
		t.Errorf("rings enabled: %v, want at least pair 0's", enabled)
	}
}
