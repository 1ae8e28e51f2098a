// Package fuzzalloc is the allocation check that netctl's fuzz targets
// share (issue 10 §3: every parser of outside input is fuzzed for "no
// panic, no unbounded allocation"). Parsing n bytes may allocate a small
// multiple of n plus a fixed slack, never an amount that a number inside
// the input chooses (a length, a count, a size field).
//
// The measure is the whole process's runtime.MemStats.TotalAlloc around
// the call, so it is an upper bound; a fuzz worker runs one input at a
// time, and go test runs fuzz seeds after the package's tests, so little
// else allocates meanwhile. It imports only the standard library.
package fuzzalloc

import (
	"runtime"
	"testing"
)

// PerByte and Slack make Bound: 64 bytes per input byte (JSON maps and
// strings, netlink attribute decoders, slices of small structs) and 1 MiB.
const (
	PerByte = 64
	Slack   = 1 << 20
)

// Bound is what parsing n bytes of outside input may allocate.
func Bound(n int) uint64 { return PerByte*uint64(max(n, 0)) + Slack }

// Allocated runs fn and returns the bytes the process allocated meanwhile.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Check runs fn, the parse of n bytes of outside input, and fails t if it
// allocated more than Bound(n).
func Check(t testing.TB, n int, fn func()) {
	t.Helper()
	if a := Allocated(fn); a > Bound(n) {
		t.Fatalf("parsing %d bytes of input allocated %d bytes, more than %d: an allocation sized by the input's contents", n, a, Bound(n))
	}
}
