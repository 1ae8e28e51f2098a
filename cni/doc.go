// Package cni is netctl's CNI plugin (CNI spec 1.1, through
// github.com/containernetworking/cni's skel): in a pod's network
// namespace it makes the host side of a VM's NIC that policy.Decide
// picks, for KubeVirt's domainAttachmentType: tap binding (or a
// NetworkAttachmentDefinition of its own):
//
//   - a persistent multiqueue vnet_hdr tap named CNI_IFNAME, owned by
//     the VM's uid (107, virt-launcher's qemu, unless "owner" says
//     otherwise), carrying the plugin's mark (hostnic.CNITapAlias, not
//     the hook's, so neither takes the other's tap for its own);
//   - a macvtap on the lower device "master" (made in the runtime's
//     namespace, moved into the pod's and renamed CNI_IFNAME);
//   - a vdpa device from the management device "mgmtdev", bound to
//     vhost_vdpa and published through the NPWG device-info file.
//
// DEL deletes only what carries netctl's mark (or, for a vdpa device,
// the name netctl derives from the attachment), and a second DEL, or a
// DEL after the namespace is gone, succeeds. CHECK verifies the link
// (kind, mark, vnet_hdr, multiqueue, owner, MTU). STATUS says ready.
//
// config.go is pure (the network configuration, every bad value answered
// with a CNI error that says what to fix); plugin.go acts through
// hostnic, the one home of a NIC's host side. This package imports no
// other face (attach, hook, libvirtattach).
package cni
