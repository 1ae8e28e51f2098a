package stats

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy"
)

// sysfsCounter reads /sys/class/net/LINK/statistics/NAME: the kernel's
// own view, independent of rtnetlink.
func sysfsCounter(t *testing.T, link, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + link + "/statistics/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHostLink: frames written into a tap's fd are what a guest sends
// (the tap's rx): the collector counts them as the guest's TX, exactly;
// the guest's RX is the tap's tx as sysfs shows it.
func TestHostLink(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "st0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if err := tap.Up(); err != nil {
		t.Fatal(err)
	}
	target := Target{VM: "none", NIC: "net0", Backend: policy.BackendUserspace, Link: "st0", Ifindex: ifindex(t, "st0"), QueuePairs: 1}
	c := NewCollector(Options{})
	ctx := context.Background()
	before := c.Collect(ctx, []Target{target})[0]
	if before.Link == nil {
		t.Fatalf("no link stats: %v", before.Missing)
	}
	frame := make([]byte, 60)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	const n = 25
	for range n {
		if _, err := unix.Write(tap.QueueFD(0), frame); err != nil {
			t.Fatal(err)
		}
	}
	after := c.Collect(ctx, []Target{target})[0]
	if after.Link == nil {
		t.Fatalf("no link stats: %v", after.Missing)
	}
	if got := after.Link.TX.Packets - before.Link.TX.Packets; got != n {
		t.Errorf("guest TX packets rose by %d, want %d (frames written into the tap)", got, n)
	}
	if got := after.Link.TX.Bytes - before.Link.TX.Bytes; got != n*60 {
		t.Errorf("guest TX bytes rose by %d, want %d", got, n*60)
	}
	if rx, tx := after.Link.RX.Packets, sysfsCounter(t, "st0", "tx_packets"); rx > tx {
		t.Errorf("guest RX %d > the tap's tx_packets %d read later", rx, tx)
	}
	if tx := sysfsCounter(t, "st0", "rx_packets"); after.Link.TX.Packets != tx {
		t.Errorf("guest TX %d, the tap's rx_packets %d", after.Link.TX.Packets, tx)
	}

	// The NIC detached: its tap is gone, and the link source says so.
	tap.Close()
	gone := c.Collect(ctx, []Target{target})[0]
	if gone.Link != nil || !strings.Contains(gone.Missing[SourceLink], "gone") {
		t.Errorf("after the tap went: link %+v, missing %q; want it reported gone", gone.Link, gone.Missing[SourceLink])
	}
}

func ifindex(t *testing.T, name string) int {
	t.Helper()
	i, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return i.Index
}
