// Package hook is netctl's libvirt qemu hook: libvirt runs
// /etc/libvirt/hooks/qemu.d/50-netctl (written by `netctl hook install`)
// as `netctl hook qemu DOMAIN OP SUBOP EXTRA` with the domain XML on
// stdin, and this package prepares and releases the host side of the
// domain's interfaces.
//
// Lifecycle, per domain:
//
//   - prepare begin: Plan reads the XML (bounded by MaxXML) and netctl's
//     metadata (namespace Namespace, one <netctl:interface mac=...> per
//     interface to manage) and the host Config (with the pool's plan,
//     Config.Pool, which every decision passes to policy), and what each
//     interface's <driver><host/><guest/> forces (Forced; a forced-on bit whose
//     prerequisite is forced off is refused here). Prepare probes the
//     host (Devices.Probe) and asks policy.Decide about each interface
//     (backend, profile, forced bits; a vdpa interface once its device
//     exists), then creates what the plan asks, each step with its undo
//     next to it, and saves a state.Domain record with the decisions. A
//     refusal or failure undoes every step and returns one error line for
//     libvirt to show.
//   - migrate begin (on the destination of an incoming migration, before
//     libvirt starts QEMU there): MigrateBegin checks, creating nothing,
//     that this host can carry each interface the domain's migratable
//     XML gives netctl: the backend and forced bits as prepare will
//     decide them, a vdpa interface's management device, and every
//     offload or ring bit the domain does not turn off (<driver>
//     attributes, <qemu:override> on its alias) that the guest may have
//     negotiated at the source and this host's backend cannot offer. A
//     refusal (one line) cancels the migration; the source runs on. It
//     never rewrites the XML (the CLI prints nothing on stdout, which
//     libvirt takes for "unchanged"). Then prepare begin creates the
//     host side as for a start, and release end (the domain's stop here,
//     or a failed incoming migration) deletes what this domain's record
//     says.
//   - started begin: the record is marked started.
//   - reconnect begin: the record is rebuilt from the XML and what exists,
//     touching no device.
//   - release end: Release deletes exactly what the record says netctl
//     created (a tap only if it still has the recorded ifindex), then the
//     record. A release without a record, or a second one, does nothing.
//
// The hook never calls back into libvirt (libvirt documents the
// deadlock), and every step runs under a context with the Config's
// timeout. The package holds no fd after a call returns: a tap is made
// persistent with its owner set and its fds closed, so libvirt (QEMU)
// opens it by name; a vdpa device is published as a symlink
// /run/netctl/vdpa/NAME -> /dev/vhost-vdpa-N that QEMU opens.
package hook
