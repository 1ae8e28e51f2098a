package vhostuser

import (
	"strings"
	"testing"
)

// TestBridgeRefusedVringNumLeavesKernel: a SET_VRING_NUM whose size the
// ring's addresses cannot hold (its used ring would run past the end of
// the front-end's memory) is refused before anything reaches vhost-net:
// the kernel keeps the old size, a running ring keeps running, and the
// bridge's own view (the status) is unchanged.
func TestBridgeRefusedVringNumLeavesKernel(t *testing.T) {
	r := startBridge(t, 1, nil)
	f := dialFrontend(t, r.path)
	f.handshake(1)
	// Ring 1 again, now with its used ring in the last 4 KiB of memory:
	// room for 256 entries (2054 bytes), not for 1024 (8198).
	f.get(GetVringBase, VringState{Index: 1})
	end := f.uaddr + testMemSize
	a := VringAddr{Index: 1, Desc: f.uaddr + 0x8000, Avail: f.uaddr + 0x9000, Used: end - 0x1000}
	f.must(SetVringBase, VringState{Index: 1, Num: 0})
	f.must(SetVringAddr, a)
	f.must(SetVringKick, RingFile{Index: 1}, f.efd)
	if d := r.k.dev(0); d.vr[1].backend < 0 || d.vr[1].num != testRingNum {
		t.Fatalf("ring 1 before: backend %d num %d, want attached with %d entries", d.vr[1].backend, d.vr[1].num, testRingNum)
	}
	before := len(r.k.callLog())
	st0 := r.b.Status()

	f.refused(SetVringNum, VringState{Index: 1, Num: 1024})

	calls := r.k.callLog()[before:]
	for _, c := range calls {
		if strings.Contains(c, "SetVringNum") || strings.Contains(c, "SetBackend") {
			t.Errorf("a refused SET_VRING_NUM reached vhost-net: %v", calls)
			break
		}
	}
	d := r.k.dev(0)
	if d.vr[1].num != testRingNum {
		t.Errorf("vhost-net's ring 1 has %d entries after the refusal, want %d (unchanged)", d.vr[1].num, testRingNum)
	}
	if d.vr[1].backend < 0 {
		t.Error("ring 1 was detached by a refused SET_VRING_NUM")
	}
	st := r.b.Status()
	if got, want := st.Rings[1], st0.Rings[1]; got != want {
		t.Errorf("ring 1's status after the refusal %+v, before %+v", got, want)
	}
	// The same size the addresses hold is still taken.
	f.get(GetVringBase, VringState{Index: 1})
	f.must(SetVringNum, VringState{Index: 1, Num: 128})
	if d := r.k.dev(0); d.vr[1].num != 128 {
		t.Errorf("vhost-net's ring 1 has %d entries, want 128", d.vr[1].num)
	}
}
