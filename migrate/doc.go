// Package migrate moves a hand-run QEMU's netctl NICs with the VM in a
// live migration (libvirt domains have the hook instead):
//
//   - Export, on the source: a Manifest of the VM's NICs (ids, MACs,
//     queue pairs, MTU, PCI slots, the features the device offered and
//     those the guest negotiated, the host side's kind);
//   - Incoming, on the destination QEMU started with -incoming defer and
//     before migrate-incoming: each NIC re-created by a netctl attach with
//     the same id, MAC, queues and slot, the backend decided here, pinned
//     to what the source offered (and a pool's plan), refused before
//     anything is created where this host cannot offer what the guest
//     negotiated;
//   - Finish, once QEMU has migrated: on the destination announce-self for
//     the NICs; on the source quit QEMU (postmigrate: the guest has left)
//     and collect what netctl made for it, so netctl list is right on both
//     sides.
//
// The migration itself (migrate, migrate-incoming) stays the operator's:
// netctl does not choose the transport.
package migrate
