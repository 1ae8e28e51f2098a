// Package vdpa manages vDPA devices through the kernel's "vdpa"
// generic-netlink family: management devices, device add/del/show, device
// config and per-queue vendor statistics (like iproute2's vdpa command),
// their binding on the vdpa bus (sysfs), and the VMM's side of a device,
// /dev/vhost-vdpa-N (VhostDevice).
//
// Lifecycle: Dial a Client (it owns its netlink socket; Close closes it),
// AddDevice, Bind to vhost_vdpa if another driver took the device,
// OpenVhost (the VhostDevice owns that fd; Close closes it and resets the
// device), drive the device, Close it, then DeleteDevice. Every netlink
// call takes a context and returns when it ends: the kernel holds a
// delete, and with it every other vdpa request in the system, for as long
// as any process keeps the device's vhost-vdpa node open.
//
// Memory: how Map treats process memory depends on the device's parent
// (MapMode): VDUSE maps by virtual address and sees only shared mappings
// of files, so Map refuses other memory there; hardware parents (pci,
// auxiliary) pin any memory.
//
// The family exists only in the initial network namespace, and only when
// the vdpa module is loaded (Linux 5.12+): Dial says which is missing and
// wraps ErrNotAvailable. Errors wrap the shared sentinels (ErrInvalid,
// ErrBusy, ErrClosed, ErrNotSupported, ErrNotAvailable) of internal/errs.
package vdpa
