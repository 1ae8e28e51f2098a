// Package libvirtattach is netctl's face for libvirt domains: it gives a
// running domain a netctl NIC through libvirt's own API, and takes it
// away again, without going around libvirt.
//
// Attach decides the backend and features as netctl attach does for a
// hand-run QEMU (policy.Decide with the host's probe and the QEMU
// version libvirt runs), creates the host side through hostnic (a
// persistent multiqueue tap nctlN carrying netctl's mark), then asks
// libvirt to hotplug <interface type='ethernet'> with <target dev='nctlN'
// managed='no'/> and a <driver> that pins exactly the decided offloads
// (libvirtdom.NIC). libvirt opens the tap and /dev/vhost-net itself, so
// its sVirt labels, its bookkeeping, virsh domiflist, a save or a
// migration all see the NIC. The record (state, keyed by the domain's
// UUID) is written before anything is made; a failure at any step,
// libvirt's refusal included, undoes every step before it.
//
// Detach asks libvirt to unplug the interface (found by its alias
// ua-netctl-ID), waits for libvirt's device-removed event, then deletes
// the tap (only while it carries netctl's mark and the recorded ifindex)
// and the record.
//
// When the domain stops, netctl's libvirt hook (its release) deletes what
// a live attach made: the records of the domain's UUID and their taps.
// With Persistent the interface is also in the persistent definition, on
// a tap named for the domain and the id (PersistentTapName): at the next
// start the hook makes that tap again (it knows the interface by its
// alias), and Detach, finding no record then, finds the NIC through
// libvirt by its alias and tap name. Attaches to one domain are
// serialised by the domain's lock (state.LibvirtKey); the release waits
// for it only briefly, since an attach holding it may be waiting for
// libvirt, which runs the release with the domain locked.
package libvirtattach
