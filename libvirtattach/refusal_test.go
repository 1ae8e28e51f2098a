package libvirtattach

import (
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/libvirtdom"
)

// TestRefusedSaysWhatToDo: libvirt's "No more available PCI slots" (seen
// in TestHostLibvirtdAttachFullBus, which failed on a message with
// libvirt's reason and nothing on what to do) gets what to do for the
// domain's bus: a spare pcie-root-port on q35, a pci-bridge on pc; the
// error still wraps libvirt's; another refusal comes back as it is.
func TestRefusedSaysWhatToDo(t *testing.T) {
	full := errors.New("libvirt qemu:///system: attach a device to d1 (live): internal error: No more available PCI slots")
	for _, c := range []struct{ xml, want, not string }{
		{`<domain type='qemu'><name>d1</name><os><type machine='pc-q35-7.2'>hvm</type></os><devices><controller type='pci' index='0' model='pcie-root'/></devices></domain>`,
			"model='pcie-root-port'", "pci-bridge"},
		{`<domain type='qemu'><name>d1</name><os><type machine='pc-i440fx-7.2'>hvm</type></os><devices><controller type='pci' index='0' model='pci-root'/></devices></domain>`,
			"model='pci-bridge'", "pcie-root-port"},
	} {
		x, err := libvirtdom.ParseDomain([]byte(c.xml))
		if err != nil {
			t.Fatal(err)
		}
		got := refused(full, x, "d1")
		if !errors.Is(got, full) || !strings.Contains(got.Error(), "No more available PCI slots") || !strings.Contains(got.Error(), c.want) ||
			strings.Contains(got.Error(), c.not) || !strings.Contains(got.Error(), "virsh edit d1") {
			t.Errorf("%s:\n%v", c.xml, got)
		}
		other := errors.New("libvirt qemu:///system: attach a device to d1 (live): Requested operation is not valid: cannot modify the persistent configuration of a transient domain")
		if got := refused(other, x, "d1"); got != other {
			t.Errorf("another refusal: %v", got)
		}
	}
}
