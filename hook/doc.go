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
//     interface to manage) and the host Config, and what each interface's
//     <driver><host/><guest/> forces (Forced; a forced-on bit whose
//     prerequisite is forced off is refused here). Prepare probes the
//     host (Devices.Probe) and asks policy.Decide about each interface
//     (backend, profile, forced bits; a vdpa interface once its device
//     exists), then creates what the plan asks, each step with its undo
//     next to it, and saves a state.Domain record with the decisions. A
//     refusal or failure undoes every step and returns one error line for
//     libvirt to show.
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
