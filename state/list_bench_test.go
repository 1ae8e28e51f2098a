package state

import (
	"fmt"
	"testing"
)

// storeOf64 is a store holding one VM's 64 NICs, each on its own root port.
func storeOf64(b *testing.B) *Store {
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
	return s
}

// BenchmarkList64 is List of a VM with 64 NICs.
func BenchmarkList64(b *testing.B) {
	s, key := storeOf64(b), sample().Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nics, _, err := s.List(key)
		if err != nil || len(nics) != 64 {
			b.Fatal(err, len(nics))
		}
	}
}

// BenchmarkBuses64 is Buses of the same VM: what attach reads to order
// the root ports it tries.
func BenchmarkBuses64(b *testing.B) {
	s, n := storeOf64(b), sample()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := s.Buses(n.Key(), n.QEMUPID, n.QEMUStart); len(got) != 64 {
			b.Fatal(len(got))
		}
	}
}
