package vhostuser

import "github.com/netctl/netctl/internal/errs"

// The sentinel errors this package wraps, shared with netctl's other
// packages (test with errors.Is).
var (
	// ErrInvalid: a front-end's message is malformed or out of range, or
	// a Config is inconsistent. Nothing was changed.
	ErrInvalid = errs.ErrInvalid
	// ErrBusy: another front-end is connected to the bridge.
	ErrBusy = errs.ErrBusy
	// ErrClosed: the bridge was used after Close.
	ErrClosed = errs.ErrClosed
	// ErrNotSupported: the request or feature is one the bridge does not
	// implement (and did not offer).
	ErrNotSupported = errs.ErrNotSupported
	// ErrConflict: the socket path holds a file that is not a socket.
	ErrConflict = errs.ErrConflict
)
