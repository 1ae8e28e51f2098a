// Package vdpa manages vDPA devices through the kernel's "vdpa"
// generic-netlink family: management devices, device add/del/show, device
// config and per-queue vendor statistics (like iproute2's vdpa command).
//
// The family exists only in the initial network namespace, and only when
// the vdpa module is loaded (Linux 5.12+): Dial says which is missing.
// A Client is safe for concurrent use; it owns its netlink socket.
package vdpa
