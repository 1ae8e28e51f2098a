package vhostuser

import (
	"testing"
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
