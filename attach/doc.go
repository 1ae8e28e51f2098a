// Package attach gives a running QEMU a virtio-net NIC over QMP, takes it
// away again, and lists what netctl attached. The sequence follows
// libvirt's qemuDomainAttachNetDevice: read QEMU (version, name, machine,
// the netdev and device ids in use, the fdsets), probe the host and ask
// policy.Decide for the backend (vDPA -> vhost-net -> QEMU's userspace
// virtio-net, each skipped step with its reason), create or open the
// backend (a multiqueue vnet_hdr tap, a macvtap on a lower device, a vdpa
// device bound to vhost_vdpa), open one /dev/vhost-net per queue pair for
// vhost-net, pass every fd with getfd on the one QMP connection,
// netdev_add, check that the netdev exists, device_add virtio-net-pci, and
// record the NIC in the state directory (package state).
//
// Every effectful step pushes its undo right after it succeeds; on any
// later failure the undos run in reverse, so nothing is left in QEMU
// (netdevs, devices, fd names, fdsets), on the host (links, vdpa devices,
// fds) or in the state directory.
//
// Ownership of fds: the Host's backends and vhost fds belong to attach
// until they are passed; QEMU gets its own copies with getfd (SCM_RIGHTS
// duplicates them), and attach closes its copies before it returns, on
// success and on failure. A tap netctl creates is not persistent: it lives
// as long as QEMU holds its queues, so netdev_del (or QEMU's exit) removes
// it. A macvtap netctl creates is a link of its own and is deleted at
// detach. Nothing netctl only opened (--tap, --vdpa) is ever deleted.
//
// After a VM dies, GC (netctl gc) collects the records whose QEMU has
// exited or no longer has the NIC: it deletes what netctl created for
// them and removes the records and the lock files of VMs that are gone.
package attach
