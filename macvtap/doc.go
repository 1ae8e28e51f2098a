// Package macvtap holds the backends vhost-net can attach to: tap devices
// (/dev/net/tun), macvtap queues (/dev/tapN) and packet sockets, each with
// its virtio-net header size and offloads.
//
// # Lifecycle and fds
//
// CreateTap, CreateMacvtap and OpenPacketSocket return a Backend that owns
// its fds: QueueFD lends one (it stays open until Close, and the caller
// must not close it). Close closes every fd; a tap that is not persistent
// disappears with its last fd, and a macvtap that CreateMacvtap created is
// deleted. Close is idempotent; any other call after Close fails with
// ErrClosed. On any failure a constructor leaves nothing behind: no fd, no
// link, no device node.
//
// # Device nodes
//
// A macvtap's queues are opened through its character device, tapN where N
// is the ifindex. Interface indexes are per network namespace but /dev is
// shared, so /dev/tapN may belong to another namespace's macvtap: netctl
// opens it only when its major:minor is the one sysfs gives for this
// macvtap, and otherwise opens the queues through a private node in a
// fresh directory of its own (under os.TempDir(), or under /dev when that
// is on a nodev mount), which it removes before CreateMacvtap returns. It
// never creates, replaces or removes a node in /dev. When no private node
// can be made either, CreateMacvtap fails with ErrConflict, naming the
// node in the way, and leaves nothing behind.
//
// # Offloads
//
// ApplyGuestFeatures sets the header size and the receive offloads for
// what a guest acknowledged, as one step: on failure both are as they were.
// ProbeOffloads finds by trial what this kernel takes, on scratch devices
// in a throwaway network namespace, never on a device that carries traffic.
//
// # Errors
//
// Errors wrap ErrInvalid (bad input, nothing changed), ErrNotSupported
// (this kernel refuses it), ErrNotAvailable (a module or device node is
// missing), ErrConflict (a node or link netctl does not own is in the way),
// ErrBusy (another device holds it) and ErrClosed (used after Close); test
// with errors.Is. They also keep the kernel's errno (%w).
package macvtap
