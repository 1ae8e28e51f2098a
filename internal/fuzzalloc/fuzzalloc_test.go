package fuzzalloc

import "testing"

var sink []byte

// TestCheckCatchesAnAllocationSizedByTheInput: a parser that trusts a
// length field allocates what the field says; Check fails it. A parser
// that allocates in proportion to its input passes.
func TestCheckCatchesAnAllocationSizedByTheInput(t *testing.T) {
	input := []byte{0, 0, 0, 4} // a 4-byte "length" of 64 MiB
	trusting := func() { sink = make([]byte, int(input[0])|int(input[1])<<8|int(input[2])<<16|int(input[3])<<24) }
	if a := Allocated(trusting); a <= Bound(len(input)) {
		t.Fatalf("the trusting parser allocated %d bytes, within the bound %d", a, Bound(len(input)))
	}
	ft := &fakeT{TB: t}
	func() {
		defer func() { recover() }() // fakeT.Fatalf panics to stop fn's caller as t.Fatalf would
		Check(ft, len(input), trusting)
	}()
	if !ft.failed {
		t.Error("Check passed an allocation of 64 MiB for 4 bytes")
	}
	sink = nil
	Check(t, 1000, func() { sink = make([]byte, 1000*PerByte) })
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
