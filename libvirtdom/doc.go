// Package libvirtdom is netctl's client of libvirt's own API: it talks to
// libvirtd (or the modular virtqemud) over its unix socket with the pure-Go
// RPC client github.com/digitalocean/go-libvirt (no cgo, no libvirt.so),
// and reads and writes domain XML with libvirt.org/go/libvirtxml.
//
// The RPC client is behind the Client interface, and its implementation
// is libvirtdom/rpc, which a program links with a blank import (netctl's
// full build does, and the tests that dial). Without it Dial fails with
// ErrNotLinked, or first calls Unlinked if set (the split netctl runs
// netctl-full there): a program that only builds or reads XML does not
// link go-libvirt, golang.org/x/crypto/ssh and crypto/tls.
//
// Lifecycle. Dial(ctx, uri) opens one connection (qemu:///system by
// default; qemu+unix:///system?socket=PATH names the socket, as a private
// daemon needs) and Close ends it; a Conn is safe for concurrent use (the
// RPC client multiplexes calls). Every call takes a context: when it ends
// before libvirt answers, the connection is closed (a libvirt RPC cannot be
// cancelled otherwise) and the call returns the context's error, so a
// caller with a deadline never hangs on a daemon that stopped answering.
// The package holds no fd but the socket.
//
// What it does, each like its virsh equivalent:
//
//   - Lookup finds a domain by name or UUID (virsh domuuid/dominfo; a name
//     that looks like a UUID is tried as a UUID first, then as a name).
//   - XML reads the live or persistent definition (virsh dumpxml
//     [--inactive]); ParseDomain parses it bounded by MaxXML, never
//     panicking on what a daemon sends.
//   - Attach and Detach hotplug a device (virsh attach-device /
//     detach-device --live --config); WatchRemoved registers for libvirt's
//     device-removed and device-removal-failed events
//     (virConnectDomainEventCallbackRegisterAny) before the detach, and
//     Removal.Wait waits for the alias with a deadline, returning
//     ErrPending when the guest has not let go yet.
//   - MonitorCommand passes a QMP command through
//     (virDomainQemuMonitorCommand, virsh qemu-monitor-command): libvirt
//     then marks the domain "tainted: custom-monitor" in its log, which
//     the result says (Tainted).
//   - InterfaceStats reads libvirt's counters of a host-side interface
//     (virDomainInterfaceStats, virsh domifstat).
//   - Define writes a persistent definition (virDomainDefineXML, virsh
//     define).
//
// The pure half needs no daemon: NIC.Interface builds the
// <interface type='ethernet'> or <interface type='vdpa'> netctl hotplugs
// for a decision (DriverFor maps a policy.Decision to <driver> with the
// <host/> and <guest/> attributes that pin exactly the decided offloads,
// and says what libvirt's XML cannot express), and Pin rewrites only the
// <driver> elements of chosen interfaces in a domain's XML, leaving every
// other byte as it was.
package libvirtdom
