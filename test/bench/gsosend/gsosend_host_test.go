package gsosend

import (
	"sync/atomic"
	"testing"
	"time"

	vnl "github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostStart: on the test's own loopback the kernel takes the GSO
// frames (sent counts them) and stop ends the sender: the count no longer
// moves.
func TestHostStart(t *testing.T) {
	testenv.Host(t)
	lo, err := vnl.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := vnl.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Uint64
	stop, err := Start(lo.Attrs().Index, &sent)
	if err != nil {
		t.Fatal(err)
	}
	for sent.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	stop()
	n := sent.Load()
	time.Sleep(50 * time.Millisecond)
	if sent.Load() != n {
		t.Fatalf("frames still counted after stop: %d, then %d", n, sent.Load())
	}
}
