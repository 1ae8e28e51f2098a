package qemuproc

import "github.com/netctl/netctl/internal/errs"

// The shared sentinel errors (internal/errs), re-exported.
var (
	ErrInvalid      = errs.ErrInvalid
	ErrBusy         = errs.ErrBusy
	ErrNotAvailable = errs.ErrNotAvailable
	ErrConflict     = errs.ErrConflict
)
