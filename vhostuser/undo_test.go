package vhostuser

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

// TestBridgeUndo makes the second device refuse each multi-device step and
// checks that the first device is put back, nothing stays mapped, and the
// front-end learns of the failure and can go on.
func TestBridgeUndo(t *testing.T) {
	r := startBridge(t, 2, nil)
	f := dialFrontend(t, r.path)
	_, maps0 := resources(t)
	f.setup()

	// SET_FEATURES: device 1 refuses; device 0 keeps VERSION_1, the tap its
	// header.
	hdr0, _ := r.tap.VnetHdrSize()
	r.k.failAfter("SetFeatures", 1, unix.EIO)
	f.refused(SetFeatures, U64(virtio.EventIdx|virtio.Features(FeatureProtocolFeatures))) // a legacy guest: 10-byte header
	if d := r.k.dev(0); d.features != virtio.Version1 {
		t.Errorf("device 0 features %v after the refused SET_FEATURES, want VERSION_1 back", d.features)
	}
	if hdr, _ := r.tap.VnetHdrSize(); hdr != hdr0 {
		t.Errorf("tap header %d after the refused SET_FEATURES, want %d", hdr, hdr0)
	}

	// ADD_MEM_REG: device 1 refuses the new table; device 0 gets the old
	// one back and the new region is unmapped.
	_, maps1 := resources(t)
	old := r.k.dev(0).table
	r.k.failAfter("SetMemTable", 1, unix.ENOMEM)
	other := memfd(t, "vu-other", 4096)
	f.refused(AddMemReg, SingleMemRegion{Region: MemRegion{GuestPhysAddr: 1 << 32, Size: 4096, UserAddr: 1 << 40}}, other)
	if d := r.k.dev(0); len(d.table) != len(old) || d.table[0] != old[0] {
		t.Errorf("device 0 table %+v after the refused ADD_MEM_REG, want %+v", d.table, old)
	}
	if _, maps := resources(t); maps != maps1 {
		t.Errorf("%d front-end mappings after the refused ADD_MEM_REG, %d before", maps, maps1)
	}

	// SET_LOG_BASE: device 1 refuses; device 0 has no log again, and a
	// refusal of a request with a mandatory reply closes the connection.
	r.k.failAfter("SetLogBase", 1, unix.EFAULT)
	log := memfd(t, "vu-log", 4096)
	f.dropped(msgBytes(NewMessage(SetLogBase, Log{MmapSize: 4096})), log)
	r.waitIdle(t, 1)
	if _, maps := resources(t); maps != maps0 {
		t.Errorf("%d front-end mappings after the session, %d before", maps, maps0)
	}
	// And the bridge serves the next front-end.
	g := dialFrontend(t, r.path)
	g.handshake(2)
}
