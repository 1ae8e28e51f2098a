package hook

import (
	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy"
)

// Devices is what the hook does to the host: hostnic's one interface of
// the host side of a NIC. RealDevices does it to this host (in the
// calling thread's network namespace), a test passes a fake. No method
// the hook calls leaves an fd open.
type Devices = hostnic.Host

// RealDevices acts on this host (hostnic.Real).
type RealDevices = hostnic.Real

// TapAlias is the alias (ip link set NAME alias ...) the hook's taps
// carry (hostnic.TapAlias): the mark by which a reconnect without a
// record tells the hook's taps from others', and without which release
// deletes none.
const TapAlias = hostnic.TapAlias

// tapSpec is the persistent tap interface it asks for, owned by owner
// (NoOwner: root only).
func tapSpec(it Interface, owner int) hostnic.PersistentTap {
	return hostnic.PersistentTap{Name: it.Name, Queues: max(it.Queues, 1), MTU: it.MTU, Owner: owner}
}

// vdpaSpec is the vdpa device interface it asks for. The MAC is
// optional: libvirt gives QEMU the XML's MAC for the guest, so a
// management device that takes none (VDUSE) gets the device without.
func vdpaSpec(it Interface, pool *policy.Pool) hostnic.VDPASpec {
	return hostnic.VDPASpec{Name: it.Name, Mgmtdev: it.Mgmtdev, MAC: it.MAC, MTU: it.MTU, MaxVQP: it.Queues, MACOptional: true, Pin: pool}
}
