package virtio

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// Seeds from real output: the names QEMU 7.2 printed in
// x-query-virtio-status (policy/diagnose/testdata/qemu-7.2-status.json),
// the names netctl probe printed for vhost-net on 6.12
// (policy/testdata/probe-6.12.json) and iproute2's "bit_54" style.
var realNames = []string{
	"VIRTIO_NET_F_CTRL_GUEST_OFFLOADS: Control channel offloading reconfig. supported",
	"VIRTIO_NET_F_GUEST_CSUM",
	"VIRTIO_RING_F_EVENT_IDX",
	"VIRTIO_F_VERSION_1",
	"VIRTIO_F_IOMMU_PLATFORM",
	"VHOST_USER_F_PROTOCOL_FEATURES",
	"VIRTIO_NET_F_GUEST_USO4",
	"MRG_RXBUF", "NOTIFY_ON_EMPTY", "LOG_ALL", "ANY_LAYOUT", "RING_RESET",
	"bit 58", "bit_54",
}

// FuzzParseFeature: no panic, no allocation beyond the input, and every
// name it takes comes back from BitName and parses to the same bit.
func FuzzParseFeature(f *testing.F) {
	for _, n := range realNames {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		var b Features
		var ok bool
		fuzzalloc.Check(t, len(name), func() { b, ok = ParseFeature(name) })
		if !ok {
			if b != 0 {
				t.Fatalf("ParseFeature(%q) = %#x, false", name, uint64(b))
			}
			return
		}
		bits := b.Bits()
		if len(bits) != 1 {
			t.Fatalf("ParseFeature(%q) = %#x: not one bit", name, uint64(b))
		}
		if again, ok := ParseFeature(BitName(bits[0])); !ok || again != b {
			t.Fatalf("ParseFeature(%q) = bit %d, but ParseFeature(%q) = %#x, %v", name, bits[0], BitName(bits[0]), uint64(again), ok)
		}
		if len(strings.TrimSpace(name)) > maxNameLen {
			t.Fatalf("took a name of %d bytes", len(name))
		}
	})
}

// FuzzParseFeatures: decode -> encode -> decode gives the same word, and
// any text String printed parses back.
func FuzzParseFeatures(f *testing.F) {
	f.Add("MRG_RXBUF|NOTIFY_ON_EMPTY|LOG_ALL|ANY_LAYOUT|INDIRECT_DESC|EVENT_IDX|VERSION_1|ACCESS_PLATFORM|RING_RESET", uint64(0x1033d008000))
	f.Add("CSUM|GUEST_CSUM|CTRL_GUEST_OFFLOADS|MAC|GUEST_TSO4|GUEST_TSO6|GUEST_ECN|GUEST_UFO|HOST_TSO4|HOST_TSO6|HOST_ECN|HOST_UFO|"+
		"MRG_RXBUF|STATUS|CTRL_VQ|CTRL_RX|CTRL_VLAN|GUEST_ANNOUNCE|CTRL_MAC_ADDR|INDIRECT_DESC|EVENT_IDX|VERSION_1|RING_RESET", uint64(0x10130afffa7)) // the 6.12 guest of testdata/guest-6.12-features.txt
	f.Add("0", uint64(0))
	f.Add("CSUM|bit 4|bit 58", ^uint64(0))
	f.Fuzz(func(t *testing.T, s string, word uint64) {
		if got, err := ParseFeatures(Features(word).String()); err != nil || got != Features(word) {
			t.Fatalf("ParseFeatures(%q) = %#x, %v; want %#x", Features(word).String(), uint64(got), err, word)
		}
		var f Features
		var err error
		fuzzalloc.Check(t, len(s), func() { f, err = ParseFeatures(s) })
		if err != nil {
			return
		}
		again, err := ParseFeatures(f.String())
		if err != nil || again != f {
			t.Fatalf("%q -> %#x -> %q -> %#x, %v", s, uint64(f), f.String(), uint64(again), err)
		}
	})
}
