// Package kubevirt is netctl's KubeVirt network binding plugin: what the
// hook sidecar (netctl kubevirt sidecar, package kubevirt/sidecar) does
// to the domain virt-launcher is about to define. DefineDomain rewrites,
// with libvirtxml, the interfaces of the VMI whose binding is netctl's:
// <driver name='vhost' queues='N'> on the tap the CNI plugin made (or
// type='vdpa' on the device the network-info file names), with a pool
// plan's pinned offloads and <qemu:override>, keeping everything else of
// the domain byte for byte.
//
// The package is pure: it decides from its inputs (domain XML, VMI JSON,
// the network-info file's bytes, a plan) and opens no device, file or
// socket (TestKubevirtIsPure). The privileged part is the CNI plugin.
//
// KubeVirt's own names it uses (annotations, paths, the alias prefix,
// queue cap) come from kubevirt/kubevirt at d923fdb815 and are cited
// where they are defined.
package kubevirt
