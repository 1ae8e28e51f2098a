package macvtap_test

import (
	"errors"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostClosedBackendsFail: after Close every backend refuses with
// ErrClosed (never an ioctl on a closed, maybe reused, fd number), and a
// second Close is not an error.
func TestHostClosedBackendsFail(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlcl0")
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlcl1", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlcl2", Lower: "nctlcl0", DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := macvtap.OpenPacketSocket(macvtap.PacketConfig{Interface: "nctlcl0", VnetHdrSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []macvtap.Backend{tap, mv, p} {
		if err := b.Close(); err != nil {
			t.Fatalf("%s: %v", b.Kind(), err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("%s: second Close: %v", b.Kind(), err)
		}
		if err := b.SetOffloads(macvtap.OffloadCSUM); !errors.Is(err, macvtap.ErrClosed) {
			t.Errorf("%s: SetOffloads after Close: %v, want ErrClosed", b.Kind(), err)
		}
		if err := b.SetVnetHdrSize(12); !errors.Is(err, macvtap.ErrClosed) {
			t.Errorf("%s: SetVnetHdrSize after Close: %v, want ErrClosed", b.Kind(), err)
		}
		if _, err := b.VnetHdrSize(); !errors.Is(err, macvtap.ErrClosed) {
			t.Errorf("%s: VnetHdrSize after Close: %v, want ErrClosed", b.Kind(), err)
		}
		if fd := b.QueueFD(0); fd != -1 {
			t.Errorf("%s: QueueFD(0) = %d after Close, want -1", b.Kind(), fd)
		}
	}
	if err := tap.DetachQueue(0); !errors.Is(err, macvtap.ErrClosed) {
		t.Errorf("DetachQueue after Close: %v", err)
	}
}
