// Package vhostnet drives the kernel's vhost-net device (/dev/vhost-net).
//
// One Device is one open /dev/vhost-net fd and drives one virtio-net queue
// pair (virtqueue 0 is RX, 1 is TX). The Device owns its fd and closes it in
// Close. The owner is the process that called SetOwner (any of its threads
// may then issue calls, which suits Go). A NIC is a multiqueue data path:
// NewNIC opens one Device per queue pair and owns them; it owns none of the
// fds it is given (backends, eventfds), and it keeps its own copy of the
// NICConfig.
//
// Bad arguments are refused before the kernel is asked, with errors that
// wrap ErrInvalid and name the valid range: ring sizes, ring alignment,
// memory tables (the kernel itself takes overlapping regions silently),
// backends that are neither taps, macvtaps nor AF_PACKET SOCK_RAW sockets,
// and bit 27 (ANY_LAYOUT, which vhost-net reads as
// VHOST_NET_F_VIRTIO_NET_HDR) with a backend that has its own virtio-net
// header, which would put the header on twice. Use after Close wraps
// ErrClosed; calls the kernel lacks wrap ErrNotSupported; a missing
// /dev/vhost-net wraps ErrNotAvailable. These are internal/errs's
// sentinels, shared with netctl's other packages.
//
// Minimum kernel: vhost-net has been in Linux since 2.6.33; the features it
// reports differ by version (6.12 adds RING_RESET, which 6.1 lacks).
package vhostnet
