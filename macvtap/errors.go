package macvtap

import "github.com/netctl/netctl/internal/errs"

// The sentinel errors this package wraps (the same values as in
// internal/errs, vdpa and vhostnet). Test with errors.Is; the message of the
// wrapping error says what happened and what to do.
var (
	// ErrNotSupported: this kernel refuses what was asked, for example
	// USO offloads before Linux 6.2, or a 12-byte header on a packet
	// socket on a kernel without PACKET_VNET_HDR_SZ (6.1).
	ErrNotSupported = errs.ErrNotSupported
	// ErrInvalid: an argument is out of range (queues, MTU, header size,
	// offload combination, mode); nothing was created or changed. The
	// message names the valid range.
	ErrInvalid = errs.ErrInvalid
	// ErrConflict: a macvtap's /dev/tapN belongs to another device (a
	// macvtap with the same ifindex in another network namespace) and no
	// private node could be made instead; netctl leaves it alone. Also:
	// CreateTap with Exclusive found the name taken.
	ErrConflict = errs.ErrConflict
	// ErrClosed: the backend was used after Close.
	ErrClosed = errs.ErrClosed
	// ErrNotAvailable: a module or device node the call needs is missing
	// (tun: /dev/net/tun; the macvtap module); load it.
	ErrNotAvailable = errs.ErrNotAvailable
	// ErrBusy: another device holds what was asked for (a passthru
	// macvtap's lower device already has a macvlan or macvtap); nothing
	// was changed.
	ErrBusy = errs.ErrBusy
)
