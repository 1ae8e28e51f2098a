package selftest

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

func TestVMSelftestTwoQueues(t *testing.T) {
	k := testenv.VM(t)
	fds := testenv.OpenFDs(t)
	rep, err := Run(t.Context(), Options{Queues: 2, Frames: 500})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Offered == 0 || rep.HeaderSize != 12 || len(rep.Queues) != 2 || !strings.HasPrefix(rep.Kernel, k.Name) {
		t.Errorf("report %+v", rep)
	}
	for _, q := range rep.Queues {
		if q.TXSent != 500 || q.TXPackets == 0 || q.RXPackets == 0 {
			t.Errorf("queue %d: %+v", q.Queue, q)
		}
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the selftest, %d before", n, fds)
	}
}
