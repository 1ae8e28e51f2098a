package vdpa

import "github.com/netctl/netctl/internal/errs"

// The sentinel errors this package returns, shared with netctl's other
// packages (internal/errs): test with errors.Is, never against an errno.
var (
	// ErrNotSupported: the device or its parent lacks the call (suspend
	// and resume on VDUSE, vstats on a parent without vendor statistics,
	// mac/mtu/max_vqp on a management device that takes no config).
	ErrNotSupported = errs.ErrNotSupported
	// ErrNotAvailable: the vdpa netlink family is missing (no vdpa module,
	// or not the initial network namespace).
	ErrNotAvailable = errs.ErrNotAvailable
	// ErrBusy: a process holds the device's vhost-vdpa node open, or a
	// delete did not finish within the caller's deadline because one does.
	ErrBusy = errs.ErrBusy
	// ErrClosed: a VhostDevice or Client was used after Close.
	ErrClosed = errs.ErrClosed
	// ErrInvalid: an argument is out of range (the message names the
	// range) or a reply from the kernel is malformed; nothing was changed.
	ErrInvalid = errs.ErrInvalid
)

// ErrNoVDPA is wrapped by Dial's error when this kernel (or this network
// namespace) has no vdpa family. It is the same value as ErrNotAvailable,
// kept for callers that test for it by this name.
var ErrNoVDPA = ErrNotAvailable
