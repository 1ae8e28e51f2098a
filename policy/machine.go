package policy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/netctl/netctl/virtio"
)

// MachineOff are the managed bits a domain's machine type turns off
// through QEMU's compat properties, whatever the QEMU that runs it
// (hw/core/machine.c): hw_compat_7_1 sets queue_reset=false (RING_RESET
// came in QEMU 7.2), hw_compat_8_1 host_uso, guest_uso4 and guest_uso6
// off (USO came in 8.2; 8.2.0 put them in hw_compat_8_0, so only a
// machine of 8.0 or older counts here). A guest on such a machine never
// negotiated those bits, wherever it ran. machine is the versioned
// name libvirt's live XML carries ("pc-q35-7.2", "pc-i440fx-8.0",
// "virt-7.2"); an unversioned or distribution-named one, and a name
// outside QEMU's versioned families (xenfv-4.2 is Xen's version), turn
// off nothing.
func MachineOff(machine string) virtio.Features {
	i := strings.LastIndexByte(machine, '-')
	if i < 0 || !slices.Contains(compatFamilies, machine[:i+1]) {
		return 0
	}
	major, minor, ok := strings.Cut(machine[i+1:], ".")
	if !ok || !machineNumber(major) || !machineNumber(minor) {
		return 0
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || ma < 1 || ma > 99 || mi < 0 || mi > 99 {
		return 0
	}
	v := ma*100 + mi
	var off virtio.Features
	if v < 702 {
		off |= virtio.RingReset
	}
	if v < 801 {
		off |= virtio.NetHostUSO | virtio.NetGuestUSO4 | virtio.NetGuestUSO6
	}
	return off
}

// compatFamilies are the machine names QEMU versions with its own
// version and the hw_compat_X_Y properties (x86's pc-i440fx, pc-q35 and
// the old pc-1.x, Arm's and m68k's virt, POWER's pseries, s390's ccw).
var compatFamilies = []string{"pc-i440fx-", "pc-q35-", "pc-", "virt-", "pseries-", "s390-ccw-virtio-"}

// machineNumber says whether s is a version number as QEMU writes one in a
// machine name: digits, no sign, no leading zero.
func machineNumber(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
