package vdpa

import (
	"strconv"

	"github.com/netctl/netctl/virtio"
)

// FeatureNames names the set bits of f as iproute2's vdpa prints them
// (RING_EVENT_IDX, VERSION_1, GUEST_TSO4, ...), except that the USO bits,
// which iproute2 prints as bit_54..bit_56, have their names (GUEST_USO4,
// GUEST_USO6, HOST_USO).
func FeatureNames(f virtio.Features) []string {
	var ns []string
	for _, b := range f.Bits() {
		ns = append(ns, featureName(b))
	}
	return ns
}

func featureName(b uint) string {
	switch b {
	case 28:
		return "RING_INDIRECT_DESC"
	case 29:
		return "RING_EVENT_IDX"
	case 26, 40, 41, 39:
		// iproute2 has no name for these
		return "bit_" + strconv.Itoa(int(b))
	}
	n := virtio.BitName(b)
	if len(n) > 4 && n[:4] == "bit " {
		return "bit_" + n[4:]
	}
	return n
}
