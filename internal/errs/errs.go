// Package errs holds the sentinel errors that netctl's public packages
// share. Each public package re-exports the ones it returns (for example
// vdpa.ErrNotSupported and vhostnet.ErrNotSupported are the same value), so
// a caller tests with errors.Is against whichever package it uses, never
// against a bare errno such as unix.EINVAL.
//
// Every error that netctl returns for one of these conditions wraps the
// sentinel, and its text says what happened and what to do.
package errs

import "errors"

var (
	// ErrNotSupported: the kernel, the device or its driver lacks the
	// feature asked for (a newer kernel or another parent may have it).
	ErrNotSupported = errors.New("not supported")
	// ErrNotAvailable: a device node, module or netlink family that the
	// call needs is not there (load the module, or use another backend).
	ErrNotAvailable = errors.New("not available")
	// ErrBusy: something else holds the object (an open fd, a bound
	// driver); nothing was changed.
	ErrBusy = errors.New("busy")
	// ErrClosed: the object was used after Close.
	ErrClosed = errors.New("use of a closed object")
	// ErrInvalid: an argument is out of range or inconsistent; nothing was
	// changed. The message names the valid range.
	ErrInvalid = errors.New("invalid argument")
	// ErrConflict: the call would take over or change something netctl
	// does not own (another process's device node, link or device).
	ErrConflict = errors.New("conflict with an object netctl does not own")
)
