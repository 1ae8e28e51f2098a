package selftest

import (
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// FuzzTallyAdd feeds arbitrary bytes, as the host's packet socket or the
// guest's RX ring would deliver them, to the frame checker: it must not
// panic, must count a frame at most once in one of its counters, and must
// accept only the exact test frame for a sequence number.
func FuzzTallyAdd(f *testing.F) {
	const size = 80
	for _, toGuest := range []bool{false, true} {
		f.Add(toGuest, testFrame(toGuest, 0, 0, size))
		f.Add(toGuest, testFrame(toGuest, 1, 3, size))
		f.Add(toGuest, testFrame(toGuest, 1, 3, size)[:size-1])
	}
	f.Add(false, []byte{})
	f.Add(true, make([]byte, 14))
	f.Fuzz(func(t *testing.T, toGuest bool, b []byte) {
		tl := newTally(toGuest, 2, 4, size)
		var ours bool
		fuzzalloc.Check(t, len(b), func() { ours = tl.add(b) })
		n := tl.received + tl.corrupt + tl.dup
		if (ours && n != 1) || (!ours && n != 0) {
			t.Fatalf("ours %v, counted %d times", ours, n)
		}
		if tl.received == 1 {
			q, _ := tl.ours(b)
			seq := int(b[headLen])<<24 | int(b[headLen+1])<<16 | int(b[headLen+2])<<8 | int(b[headLen+3])
			if string(b) != string(testFrame(toGuest, q, seq, size)) {
				t.Fatalf("accepted a frame that is not test frame %d of queue %d", seq, q)
			}
			if tl.add(b); tl.dup != 1 {
				t.Fatal("the same frame twice is not a duplicate")
			}
		}
	})
}
