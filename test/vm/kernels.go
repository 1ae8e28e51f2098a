package vm

import (
	"fmt"
	"sort"
	"strings"
)

// Capability names what a VM kernel is known to provide. Tests read them
// from $NETCTL_VM_CAPS (see internal/testenv): a capability the kernel is
// known to have and that is missing in the guest is a test failure.
const (
	CapTun       = "tun"        // /dev/net/tun, tap devices
	CapTunUSO    = "tun_uso"    // TUN_F_USO4|TUN_F_USO6 (Linux 6.2)
	CapMacvtap   = "macvtap"    // macvtap links and /dev/tapN
	CapVeth      = "veth"       // veth pairs
	CapVhostNet  = "vhost_net"  // /dev/vhost-net
	CapVDPA      = "vdpa"       // the vdpa generic-netlink family
	CapVhostVDPA = "vhost_vdpa" // /dev/vhost-vdpa-N for vdpa devices
	CapVDUSE     = "vduse"      // /dev/vduse/control
)

// AllCaps lists every capability name (internal/testenv.Caps must hold the
// same: a test checks it).
var AllCaps = []string{CapTun, CapTunUSO, CapMacvtap, CapVeth, CapVhostNet, CapVDPA, CapVhostVDPA, CapVDUSE}

// Kernel describes one kernel of the test matrix.
type Kernel struct {
	Name    string // "6.12", "6.1": what tests and make see
	Suite   string // Debian suite the kernel package comes from
	Private bool   // the suite is not in the machine's own apt sources
	// Modules are loaded in this order (dependencies first, found from
	// each module's own modinfo). vhost_vdpa must come before virtio_vdpa
	// so that vdpa devices bind to vhost_vdpa.
	Modules []string
	// OnDemand modules are in the initramfs but not loaded at boot: a
	// guest script loads one with its dependencies by running
	// "netctl-modprobe NAME" (virtio_net, for tests that give the guest a
	// NIC: loaded at boot it would also bind to virtio_vdpa devices).
	OnDemand []string
	// Required modules must exist in the package (or be built in):
	// Prepare fails otherwise, because tests would then fail for the
	// wrong reason.
	Required []string
	// Caps are the capabilities this kernel is known to have.
	Caps []string
}

// commonModules are wanted on every kernel; missing ones are reported.
var commonModules = []string{
	"virtio_pci", "virtio_console", // harness transport (often built in)
	"9p", "9pnet_virtio", // host files at /host
	"af_packet", "dummy", "veth", "bridge",
	"tun", "tap", "macvlan", "macvtap",
	"vhost_net",
	"vdpa", "vhost_vdpa", "vduse", "virtio_vdpa", // vhost_vdpa before virtio_vdpa
}

// Kernels is the test matrix, newest first.
var Kernels = []*Kernel{
	{
		Name:     "6.12",
		Suite:    "trixie",
		Private:  true,
		Modules:  commonModules,
		OnDemand: []string{"virtio_net", "kvm_amd"},
		Required: []string{"9p", "9pnet_virtio", "tun", "macvtap", "veth", "dummy", "vhost_net", "vdpa", "vhost_vdpa", "vduse", "virtio_vdpa"},
		Caps:     []string{CapTun, CapTunUSO, CapMacvtap, CapVeth, CapVhostNet, CapVDPA, CapVhostVDPA, CapVDUSE},
	},
	{
		Name:     "6.1",
		Suite:    "bookworm",
		Modules:  commonModules,
		OnDemand: []string{"virtio_net", "kvm_amd"},
		Required: []string{"9p", "9pnet_virtio", "tun", "macvtap", "veth", "dummy", "vhost_net"},
		Caps:     []string{CapTun, CapMacvtap, CapVeth, CapVhostNet},
	},
}

// LookupKernel returns the kernel named name ("6.12", "6.1").
func LookupKernel(name string) (*Kernel, error) {
	for _, k := range Kernels {
		if k.Name == name {
			return k, nil
		}
	}
	return nil, fmt.Errorf("vm: unknown kernel %q: use one of %s", name, strings.Join(KernelNames(), ", "))
}

// SelectKernels resolves "all" or a comma-separated list of names.
func SelectKernels(spec string) ([]*Kernel, error) {
	if spec == "" || spec == "all" {
		return Kernels, nil
	}
	var ks []*Kernel
	for _, n := range strings.Split(spec, ",") {
		k, err := LookupKernel(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// KernelNames lists the names of the matrix.
func KernelNames() []string {
	var ns []string
	for _, k := range Kernels {
		ns = append(ns, k.Name)
	}
	return ns
}

// Has reports whether the kernel is known to have capability c.
func (k *Kernel) Has(c string) bool {
	for _, x := range k.Caps {
		if x == c {
			return true
		}
	}
	return false
}

// CapsString is the comma-separated, sorted list passed to the guest.
func (k *Kernel) CapsString() string {
	cs := append([]string(nil), k.Caps...)
	sort.Strings(cs)
	return strings.Join(cs, ",")
}
