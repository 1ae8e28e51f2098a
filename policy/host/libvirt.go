package host

import "fmt"

// ForLibvirtDomain takes vhost-net away from d unless domType, a libvirt
// domain's type attribute, is "kvm": libvirt opens /dev/vhost-net for no
// other domain type (qemuInterfaceOpenVhostNet), whatever <driver
// name='vhost'> says, so such a domain's QEMU runs its userspace
// virtio-net and a decision of vhost-net would be a record of what does
// not run. It reports whether it took vhost-net away.
func (d *Description) ForLibvirtDomain(domType string) bool {
	if domType == "kvm" || !d.VhostNet.Available {
		return false
	}
	d.VhostNet.Available = false
	d.VhostNet.Error = fmt.Sprintf("libvirt gives QEMU /dev/vhost-net only for a domain of type 'kvm', and this one is type %.16q "+
		"(QEMU's emulator): libvirt would run QEMU's userspace virtio-net whatever <driver name='vhost'> says; "+
		"define the domain with type='kvm' on a host with /dev/kvm for vhost-net", domType)
	return true
}
