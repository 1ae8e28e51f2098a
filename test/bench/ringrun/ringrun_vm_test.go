package ringrun

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vhostrig"
)

// TestVMRounds runs one short TX and one short RX round on a kernel
// vhost-net NIC (test/vhostrig): each must move traffic, count it as the
// benches read it (1460 payload bytes per 1500-byte TCP frame), and leave
// its ring empty for the next round.
func TestVMRounds(t *testing.T) {
	testenv.VM(t)
	testenv.Host(t)
	r := vhostrig.New(t, "rr%d", 1)
	sink, err := OpenSink(r.Ifindex)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sink)

	tx, err := TX(r.TX[0], sink, TCPFrame(1500-40, false), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TX: %+v", tx)
	if tx.Sent == 0 || tx.Frames == 0 || tx.Mbps <= 0 {
		t.Errorf("TX round %+v: want frames sent, seen by the sink and a rate", tx)
	}
	if tx.Frames > tx.Sent {
		t.Errorf("TX round %+v: the sink saw more frames than the driver sent", tx)
	}
	if tx.Payload != tx.Frames*1460 {
		t.Errorf("TX round %+v: payload %d, want 1460 bytes for each of the %d frames", tx, tx.Payload, tx.Frames)
	}
	if n := r.TX[0].Pending(); n != 0 {
		t.Errorf("%d TX buffers still pending after the round", n)
	}

	// The tap has no offloads: the kernel segments the 64 KiB GSO frames,
	// and each 1514-byte frame fits one 2048-byte buffer.
	var sent atomic.Uint64
	mbps, err := RX(r.RX[0], r.Ifindex, RXConfig{BufSize: 2048, HostSent: &sent}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RX: %.1f Mbit/s, %d host sends", mbps, sent.Load())
	if mbps <= 0 || sent.Load() == 0 {
		t.Errorf("RX round: %.1f Mbit/s from %d host sends, want both above 0", mbps, sent.Load())
	}
}
