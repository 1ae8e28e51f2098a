package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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

// interruptedErr says that a signal ended the command, before what the
// command's own error says (what was rolled back or left).
func interruptedErr(interrupted func() bool, err error) error {
	if err != nil && interrupted() {
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}
