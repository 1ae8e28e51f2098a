package vhostuser

import (
	"encoding/binary"
	hexenc "encoding/hex"
	"testing"
)

// TestFixedPayloadLayout pins the fixed-size payloads' wire bytes to the
// spec's layout ("Message types" in vhost-user.rst), written out by hand
// rather than by the code under test, and their sizes to the *Size
// constants Decode checks: a reordered or resized struct field fails here.
func TestFixedPayloadLayout(t *testing.T) {
	for _, c := range []struct {
		name string
		v    interface{ Encode() []byte }
		size int
		want string
		back func([]byte) any
	}{
		{"VringState", VringState{Index: 1, Num: 256}, VringStateSize,
			"01000000" + "00010000", func(p []byte) any { return decodeVringState(p) }},
		{"VringAddr", VringAddr{Index: 2, Flags: VringAddrFlagLog, Desc: 0x1000, Used: 0x2000, Avail: 0x3000, Log: 0x4000}, VringAddrSize,
			"02000000" + "01000000" + "0010000000000000" + "0020000000000000" + "0030000000000000" + "0040000000000000",
			func(p []byte) any { return decodeVringAddr(p) }},
		{"SingleMemRegion", SingleMemRegion{Region: MemRegion{GuestPhysAddr: 0x1, Size: 0x2, UserAddr: 0x3, MmapOffset: 0x4}}, SingleMemRegionSize,
			"0000000000000000" + "0100000000000000" + "0200000000000000" + "0300000000000000" + "0400000000000000",
			func(p []byte) any { return SingleMemRegion{Region: decodeMemRegion(p[8:])} }},
		{"Log", Log{MmapSize: 0x8000, MmapOffset: 0x10}, LogSize,
			"0080000000000000" + "1000000000000000", func(p []byte) any { return decodeFixed[Log](p) }},
	} {
		got := c.v.Encode()
		if h := hexenc.EncodeToString(got); h != c.want || len(got) != c.size {
			t.Errorf("%s: encodes to %s (%d bytes), want %s (%d)", c.name, h, len(got), c.want, c.size)
		}
		if back := c.back(got); back != any(c.v) {
			t.Errorf("%s: decodes to %#v, want %#v", c.name, back, c.v)
		}
	}
	for name, n := range map[string]int{
		"VringState": binary.Size(VringState{}), "VringAddr": binary.Size(VringAddr{}),
		"MemRegion": binary.Size(MemRegion{}), "Log": binary.Size(Log{}),
	} {
		want := map[string]int{"VringState": VringStateSize, "VringAddr": VringAddrSize, "MemRegion": MemRegionSize, "Log": LogSize}[name]
		if n != want {
			t.Errorf("%s is %d bytes on the wire, its Size constant says %d", name, n, want)
		}
	}
}

// TestMaxPayloadSizes: MaxPayload's comment's numbers. VhostUserConfig
// is 12 bytes and a 256-byte config space; SET_MEM_TABLE with
// VHOST_MEMORY_BASELINE_NREGIONS regions, the largest payload the bridge
// handles, fits.
func TestMaxPayloadSizes(t *testing.T) {
	if MaxPayload != 12+256 {
		t.Errorf("MaxPayload %d, want VhostUserConfig's 268", MaxPayload)
	}
	full := MemoryTable{Regions: make([]MemRegion, MaxFDs)}
	if n := len(full.Encode()); n != 264 || n > MaxPayload {
		t.Errorf("a full SET_MEM_TABLE is %d bytes, want 264, within MaxPayload %d", n, MaxPayload)
	}
}
