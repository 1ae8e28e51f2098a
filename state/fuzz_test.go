package state

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// FuzzParse: a record file is outside input. Seeds: a real record that
// attach wrote against QEMU 7.2 (testdata), the sample, and broken ones.
// No panic, allocation bounded; what parses validates, and encodes, parses
// again and encodes to the same bytes.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/record-qemu-7.2.json"); err == nil {
		f.Add(b)
	} else {
		f.Fatal(err)
	}
	b, _ := json.Marshal(sample())
	f.Add(b)
	f.Add([]byte(`{"schema":"netctl.nic/v1"}`))
	f.Add([]byte(`{"schema":"netctl.nic/v1"} {}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var n *NIC
		var err error
		fuzzalloc.Check(t, len(b), func() { n, err = Parse(b) })
		if err != nil {
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		again, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		n2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-encoded record does not parse: %v", err)
		}
		if again2, _ := json.Marshal(n2); !bytes.Equal(again, again2) {
			t.Fatalf("round trip changed the record:\n%s\n%s", again, again2)
		}
	})
}

// FuzzParseStartTime: /proc/PID/stat text. Seed: a real QEMU's.
func FuzzParseStartTime(f *testing.F) {
	b, err := os.ReadFile("testdata/proc-stat-qemu.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("1 (a) b) S 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzalloc.Check(t, len(b), func() { ParseStartTime(b) })
	})
}
