package libvirtattach

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// noSlot is libvirt's message when it finds no PCI address for a
// hotplug (virDomainPCIAddressGetNextAddr, an internal error: no code of
// its own to tell it by).
const noSlot = "No more available PCI slots"

// refused wraps libvirt's refusal err of the hotplug to domain x (named
// name) with what to do, where netctl knows: a full PCI bus, which
// libvirt cannot widen on a running domain (controllers are not
// hotplugged). Other refusals come back as libvirt gave them.
func refused(err error, x *libvirtxml.Domain, name string) error {
	if !strings.Contains(err.Error(), noSlot) {
		return err
	}
	if pcie(x) {
		return fmt.Errorf("%w: the domain has no free pcie-root-port to plug the NIC into (pcie.0 takes no hotplug) and libvirt adds "+
			"none to a running domain: give its definition a spare <controller type='pci' model='pcie-root-port'/> (virsh edit %s) "+
			"and restart it, or unplug a device it does not need (virsh detach-device), then attach again", err, name)
	}
	return fmt.Errorf("%w: the domain's PCI bus is full and libvirt adds no bus to a running domain: give its definition a "+
		"<controller type='pci' model='pci-bridge'/> (virsh edit %s) and restart it, or unplug a device it does not need "+
		"(virsh detach-device), then attach again", err, name)
}

// pcie says the domain's root bus is PCI Express (pcie-root: q35), where
// a hotplug needs a free pcie-root-port.
func pcie(x *libvirtxml.Domain) bool {
	if x.Devices != nil {
		for _, c := range x.Devices.Controllers {
			if c.Type == "pci" && c.Model == "pcie-root" {
				return true
			}
		}
	}
	return x.OS != nil && x.OS.Type != nil && strings.Contains(x.OS.Type.Machine, "q35")
}
