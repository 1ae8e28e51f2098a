package policy

import (
	"testing"

	"github.com/netctl/netctl/virtio"
)

// TestMachineOff: QEMU's compat properties by machine version
// (hw_compat_7_1: queue_reset; hw_compat_8_0 and older: the USO bits).
func TestMachineOff(t *testing.T) {
	uso := virtio.NetHostUSO | virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	for m, want := range map[string]virtio.Features{
		"pc-q35-7.1": virtio.RingReset | uso, "pc-i440fx-6.2": virtio.RingReset | uso, "virt-7.2": uso,
		"pc-q35-8.0": uso, "pc-q35-8.1": 0, "pc-q35-9.2": 0, "pc": 0, "q35": 0, "pc-q35-rhel9.4.0": 0,
		"": 0, "pc-q35-x.y": 0, "pc-q35-100.1": 0, "pc-q35-7.": 0,
		// Names QEMU and the distributions give: upstream versions count,
		// a distribution's own (RHEL's rhelX.Y.Z, Ubuntu's release names)
		// and an unversioned machine turn off nothing (so netctl refuses
		// rather than trusts them).
		"pc-i440fx-2.12": virtio.RingReset | uso, "s390-ccw-virtio-8.0": uso, "pseries-7.1": virtio.RingReset | uso, "pseries-7.2": uso,
		"virt-8.1": 0, "pc-q35-rhel9.2.0": 0, "virt-rhel9.2.0": 0, "pc-i440fx-rhel7.6.0": 0, "microvm": 0, "pc-q35-jammy": 0,
		"pc-i440fx-focal-hpb": 0, "pc-q35-10.0": 0, "pc-q35-7.2.0": 0,
		// Not QEMU's versioned compat machines: Xen's version, or a
		// number QEMU never names a machine with.
		"xenfv-4.2": 0, "xenfv-3.1": 0, "pc-q35-+7.1": 0, "pc-q35-07.1": 0, "pc-q35-7.01": 0, "my-board-7.1": 0,
	} {
		if got := MachineOff(m); got != want {
			t.Errorf("MachineOff(%q) = %s, want %s", m, got, want)
		}
	}
}

// TestQEMUHasProp: the USO properties came in QEMU 8.2, queue_reset is
// older than every QEMU netctl supports.
func TestQEMUHasProp(t *testing.T) {
	for _, c := range []struct {
		v, prop    string
		has, known bool
	}{
		{"7.2.22", "guest_uso4", false, true},
		{"8.2.0", "guest_uso4", true, true},
		{"9.1", "host_uso", true, true},
		{"7.2.22", "queue_reset", true, true},
		{"x", "guest_uso6", false, false},
	} {
		if has, known := QEMUHasProp(c.v, c.prop); has != c.has || known != c.known {
			t.Errorf("QEMU %s %s: %v %v, want %v %v", c.v, c.prop, has, known, c.has, c.known)
		}
	}
}
