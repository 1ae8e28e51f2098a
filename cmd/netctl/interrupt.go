package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// interruptible is a context that ends after timeout or at the first
// SIGINT, SIGTERM or SIGHUP, so that a command that changes a VM undoes
// what it did (attach rolls back with a fresh context) instead of Go's
// default handler killing netctl half-way. After that first signal the
// default action is back: a second Ctrl-C kills. interrupted says whether
// a signal ended ctx; stop releases both.
func interruptible(timeout time.Duration) (ctx context.Context, interrupted func() bool, stop func()) {
	sigCtx, stopSig := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	context.AfterFunc(sigCtx, stopSig)
	ctx, cancel := context.WithTimeout(sigCtx, timeout)
	return ctx, func() bool { return sigCtx.Err() != nil }, func() { cancel(); stopSig() }
}

// interruptedErr says that a signal ended the command noun ("attach"),
// before what the command's own error says (what was rolled back or
// left): "attach: interrupted: netdev_add ...".
func interruptedErr(noun string, interrupted func() bool, err error) error {
	if err == nil || !interrupted() {
		return err
	}
	return &interruptedError{msg: noun + ": interrupted: " + strings.TrimPrefix(err.Error(), noun+": "), err: err}
}

type interruptedError struct {
	msg string
	err error
}

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return e.err }
