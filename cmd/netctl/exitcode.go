package main

import (
	"errors"
	"fmt"
)

// usageError is a mistake in the command line or its input files: netctl
// exits 2 for it, 1 for any other failure.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usage makes a usageError with fmt.Errorf's formatting (%w works).
func usage(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode is the process exit status for err.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(usageError)):
		return 2
	}
	return 1
}
