package policy

import (
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
// "virt-7.2"); an unversioned or distribution-named one turns off nothing.
func MachineOff(machine string) virtio.Features {
	i := strings.LastIndexByte(machine, '-')
	if i < 0 {
		return 0
	}
	major, minor, ok := strings.Cut(machine[i+1:], ".")
	if !ok {
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
