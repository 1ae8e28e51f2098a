package qemuproc

import "github.com/netctl/netctl/internal/errs"

// The shared sentinel errors (internal/errs), re-exported.
var (
	ErrInvalid      = errs.ErrInvalid
	ErrBusy         = errs.ErrBusy
	ErrNotAvailable = errs.ErrNotAvailable
	ErrConflict     = errs.ErrConflict
)

// ErrNoVM marks "no such VM" (Find, and the CLI's name filters). It is
// also ErrNotAvailable.
var ErrNoVM error = &sentinel{"not running", ErrNotAvailable}

type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }
