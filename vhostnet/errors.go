package vhostnet

import "github.com/netctl/netctl/internal/errs"

// The sentinel errors vhostnet's calls wrap, shared with the other netctl
// packages (vdpa.ErrNotSupported is the same value). Test with errors.Is;
// the message of the wrapping error says what happened and what to do.
var (
	// ErrNotSupported: this kernel lacks the call (fork-from-owner control
	// before Linux 6.17, for example).
	ErrNotSupported = errs.ErrNotSupported
	// ErrNotAvailable: this host has no usable /dev/vhost-net (no module,
	// or no permission); Open's message says which.
	ErrNotAvailable = errs.ErrNotAvailable
	// ErrClosed: the Device or NIC was used after Close.
	ErrClosed = errs.ErrClosed
	// ErrInvalid: an argument is out of range or inconsistent (a memory
	// table with overlapping regions, a ring size that is not a power of
	// two, bit 27 acknowledged on a backend that has its own virtio-net
	// header, ...). Nothing was changed; the message names the valid range.
	ErrInvalid = errs.ErrInvalid
)
