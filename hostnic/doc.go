// Package hostnic is the one home of the host side of a NIC: the tap,
// macvtap or vdpa device behind a guest's virtio-net, as every face of
// netctl (attach for a hand-run QEMU, the libvirt hook, the libvirt face
// and the CNI plugin) makes, opens, identifies, publishes
// and deletes it. A fix to any of these lands here once.
//
// Lifecycle and ownership:
//
//   - OpenTap opens (or creates, non-persistent) a multiqueue vnet_hdr
//     tap and returns an OpenLink that owns the queue fds; CreateMacvtap
//     does the same for a macvtap. The caller passes the fds on (QEMU
//     takes its own copies) and then calls Release (keep the link) or
//     Destroy (delete it if this call created it).
//   - CreateTap makes a persistent tap for another process to open
//     (libvirt): vnet_hdr, multiqueue, owner, MTU and netctl's mark
//     (TapAlias, set before the tap becomes persistent). It leaves no fd
//     open. MarkedTapIndex finds such a tap again; DeleteTap deletes one
//     only while it still carries the mark and the recorded ifindex.
//   - CreateVDPA adds a vdpa device (like `vdpa dev add name X mgmtdev
//     Y`), binds it to vhost_vdpa and waits for its /dev/vhost-vdpa-N
//     node; Publish makes the symlink a domain's XML names. VDPAIdentity
//     is the device's sysfs inode, which a device deleted and added again
//     under the name does not keep.
//   - MoveMarkedLink marks a macvtap (MacvtapAlias) and moves it into a
//     pod's network namespace under the pod's interface name (the CNI
//     plugin); MarkedLinkIndex finds such a link there again.
//   - DeleteLink and DeleteVDPA remove only the object a caller recorded
//     (the same ifindex); NotCreatedLink and NotCreatedVDPA say why a
//     record's object is not netctl's to delete (names netctl never
//     gives: an edited record).
//
// Every multi-step call undoes what it did when a later step fails. Host
// is the interface the faces use, so that their unit tests pass fakes;
// Real acts on this host, in the calling thread's network namespace.
// Faces import this package; it imports no face.
package hostnic
