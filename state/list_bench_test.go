package state

import (
	"fmt"
	"testing"
)

// BenchmarkList64 is List of a VM with 64 NICs, as attach reads it to
// order the root ports it tries.
func BenchmarkList64(b *testing.B) {
	s := &Store{Dir: b.TempDir()}
	for i := 0; i < 64; i++ {
		n := sample()
		n.ID = fmt.Sprintf("net%d", i)
		n.Netdev = "netctl-" + n.ID
		n.Properties = map[string]string{"bus": fmt.Sprintf("rp%d", i)}
		if err := s.Save(n); err != nil {
			b.Fatal(err)
		}
	}
	key := sample().Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nics, _, err := s.List(key)
		if err != nil || len(nics) != 64 {
			b.Fatal(err, len(nics))
		}
	}
}

// BenchmarkBuses64 is Buses of the same VM: what attach now reads.
func BenchmarkBuses64(b *testing.B) {
	s := &Store{Dir: b.TempDir()}
	for i := 0; i < 64; i++ {
		n := sample()
		n.ID = fmt.Sprintf("net%d", i)
		n.Netdev = "netctl-" + n.ID
		n.Properties = map[string]string{"bus": fmt.Sprintf("rp%d", i)}
		if err := s.Save(n); err != nil {
			b.Fatal(err)
		}
	}
	n := sample()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := s.Buses(n.Key(), n.QEMUPID, n.QEMUStart); len(got) != 64 {
			b.Fatal(len(got))
		}
	}
}
