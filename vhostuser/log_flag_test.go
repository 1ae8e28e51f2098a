package vhostuser

import (
	"testing"

	"github.com/netctl/netctl/virtio"
)

// TestBridgeLogFlagNeedsLog: vhost-net logs a used ring with the LOG flag
// at log_base + gpa/4096/8 whether or not a log base was set (log_used in
// drivers/vhost/vhost.c checks only the flag), and the kernel checks the
// log address with access_ok only: with no log, log_base is 0 and a guest
// address chosen by the front-end points the bit writes anywhere in this
// process (0xc000000000, the Go heap, for gpa 0x0060000000000000). QEMU's
// vhost_dev_start sends the flagged addresses before SET_LOG_BASE when it
// starts a device during migration, so the flag is not refused: the ring
// waits, unapplied and detached, until a log is mapped.
func TestBridgeLogFlagNeedsLog(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.setup()
	a := f.ringAddr(0)
	a.Flags, a.Log = VringAddrFlagLog, 0x2000
	f.must(SetVringAddr, a)
	f.must(SetVringKick, RingFile{Index: 0}, f.efd)
	f.must(SetVringEnable, VringState{Index: 0, Num: 1})
	d := r.k.dev(0)
	if va := d.vr[0].addr; va != nil && va.LogUsed {
		t.Errorf("vhost-net got a logged used ring (log %#x) with no log base", va.Log)
	}
	if d.vr[0].backend >= 0 {
		t.Errorf("ring 0 attached (backend %d) with a logged used ring and no log", d.vr[0].backend)
	}
	// With a log mapped the ring gets its logged addresses and starts.
	log := memfd(t, "vu-log", 4096)
	if err := WriteMessage(f.c, NewMessage(SetLogBase, Log{MmapSize: 4096}, log)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.read(SetLogBase); err != nil {
		t.Fatal(err)
	}
	d = r.k.dev(0)
	if va := d.vr[0].addr; va == nil || !va.LogUsed || va.Log != 0x2000 || d.logBase == 0 {
		t.Errorf("vhost-net ring 0 addresses %+v, log base %#x: want the used ring logged at 0x2000 into the log", va, d.logBase)
	}
	if d.vr[0].backend != r.tap.QueueFD(0) {
		t.Errorf("ring 0 backend %d after SET_LOG_BASE, want the tap queue", d.vr[0].backend)
	}
}

// TestBridgeLogAllWaitsForLog: QEMU's vhost_dev_start, for a device that
// starts while the VM migrates (hw/virtio/vhost.c), sends SET_FEATURES
// with LOG_ALL, SET_MEM_TABLE and the rings (used rings logged) before
// SET_LOG_BASE. The bridge refused that LOG_ALL, so such a start failed;
// vhost-net must not get LOG_ALL before a log either (it would log to
// log_base 0 + gpa/32768). LOG_ALL is now acknowledged, withheld from
// vhost-net and every ring kept stopped until the log comes.
func TestBridgeLogAllWaitsForLog(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.get(GetFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolLogShmFD|ProtocolMQ))
	f.proto = ProtocolReplyAck | ProtocolLogShmFD | ProtocolMQ
	f.must(SetFeatures, U64(virtio.Version1|virtio.LogAll|virtio.Features(FeatureProtocolFeatures)))
	f.must(SetMemTable, f.table(), f.mem)
	for q := uint32(0); q < 2; q++ {
		a := f.ringAddr(q)
		a.Flags, a.Log = VringAddrFlagLog, uint64(q)*0x4000+0x2000
		f.must(SetVringNum, VringState{Index: q, Num: testRingNum})
		f.must(SetVringBase, VringState{Index: q})
		f.must(SetVringAddr, a)
		f.must(SetVringKick, RingFile{Index: q}, f.efd)
		f.must(SetVringEnable, VringState{Index: q, Num: 1})
	}
	d := r.k.dev(0)
	if d.features.Has(virtio.LogAll) {
		t.Errorf("vhost-net features %v with no log base", d.features)
	}
	for q := range d.vr {
		if d.vr[q].backend >= 0 {
			t.Errorf("ring %d attached with LOG_ALL and no log", q)
		}
	}
	log := memfd(t, "vu-log", 4096)
	if err := WriteMessage(f.c, NewMessage(SetLogBase, Log{MmapSize: 4096}, log)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.read(SetLogBase); err != nil {
		t.Fatal(err)
	}
	d = r.k.dev(0)
	if !d.features.Has(virtio.LogAll) || d.logBase == 0 {
		t.Errorf("after SET_LOG_BASE: vhost-net features %v, log base %#x: want LOG_ALL and the log", d.features, d.logBase)
	}
	for q := range d.vr {
		if va := d.vr[q].addr; d.vr[q].backend != r.tap.QueueFD(0) || va == nil || !va.LogUsed {
			t.Errorf("after SET_LOG_BASE: ring %d backend %d, addresses %+v: want it running, logged", q, d.vr[q].backend, va)
		}
	}
}
