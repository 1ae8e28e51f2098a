package macvtap_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

func TestHostTapVnetHdr12(t *testing.T) {
	testenv.Host(t)
	fds := testenv.OpenFDs(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctl%d", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tap.Name(), "nctl") || tap.Name() == "nctl%d" {
		t.Errorf("name %q: the template was not filled in", tap.Name())
	}
	flags, err := tap.Flags()
	if err != nil {
		t.Fatal(err)
	}
	want := uint16(linux.IFF_TAP | linux.IFF_NO_PI | linux.IFF_VNET_HDR)
	if flags&want != want || flags&linux.IFF_TUN != 0 {
		t.Errorf("flags %#x, want %#x set and IFF_TUN clear", flags, want)
	}
	if n, err := tap.VnetHdrSize(); err != nil || n != 12 {
		t.Errorf("header size %d, %v; want 12", n, err)
	}
	if _, err := net.InterfaceByName(tap.Name()); err != nil {
		t.Errorf("the tap is not a link in the test's namespace: %v", err)
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(tap.Name()); err == nil {
		t.Errorf("%s still exists after Close", tap.Name())
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after Close, %d before", n, fds)
	}
}

func TestHostTapBadInputCreatesNothing(t *testing.T) {
	testenv.Host(t)
	fds := testenv.OpenFDs(t)
	for _, c := range []struct {
		cfg  macvtap.TapConfig
		want string
	}{
		{macvtap.TapConfig{Name: "nctlbad", VnetHdr: true, VnetHdrSize: 11}, "use 10 (legacy), 12"},
		{macvtap.TapConfig{Name: "nctlbad", VnetHdrSize: 12}, "needs VnetHdr"},
		{macvtap.TapConfig{Name: "a-name-far-too-long-for-linux"}, "longer than 15 bytes"},
		{macvtap.TapConfig{Name: "nctlbad", MTU: 70000}, "a tap takes 68 to 65521"},
		{macvtap.TapConfig{Name: "nctlbad", MTU: 65522}, "a tap takes 68 to 65521"},
		{macvtap.TapConfig{Name: "nctlbad", MTU: 67}, "a tap takes 68 to 65521"},
		{macvtap.TapConfig{Name: "nctlbad", Queues: -1}, "a tap has 1 to 256"},
		{macvtap.TapConfig{Name: "nctlbad", Queues: 257}, "a tap has 1 to 256"},
		{macvtap.TapConfig{Name: "nctlbad", SndBuf: -1}, "send buffer -1"},
	} {
		_, err := macvtap.CreateTap(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c.cfg, err, c.want)
		}
		if !errors.Is(err, macvtap.ErrInvalid) {
			t.Errorf("%+v: %v does not wrap ErrInvalid", c.cfg, err)
		}
	}
	if _, err := net.InterfaceByName("nctlbad"); err == nil {
		t.Error("a failed macvtap.CreateTap left a link behind")
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after failed creates, %d before", n, fds)
	}
}

func TestHostTapMultiQueue(t *testing.T) {
	testenv.Host(t)
	fds := testenv.OpenFDs(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlmq", VnetHdr: true, VnetHdrSize: 12, Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	if tap.Queues() != 4 {
		t.Errorf("%d queues", tap.Queues())
	}
	if flags, err := tap.Flags(); err != nil || flags&linux.IFF_MULTI_QUEUE == 0 {
		t.Errorf("flags %#x, %v: want IFF_MULTI_QUEUE", flags, err)
	}
	if err := tap.SetOffloads(macvtap.Offloads(linux.TUN_F_CSUM | linux.TUN_F_TSO4 | linux.TUN_F_TSO6)); err != nil {
		t.Error(err)
	}
	if err := tap.SetOffloads(macvtap.Offloads(linux.TUN_F_TSO4)); err == nil {
		t.Error("TSO4 without CSUM was accepted")
	}
	tap.Close()
	if _, err := macvtap.CreateTap(macvtap.TapConfig{Queues: 257}); err == nil || !strings.Contains(err.Error(), "1 to 256") {
		t.Errorf("257 queues: %v", err)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after Close, %d before", n, fds)
	}
}

func TestHostTapMTURange(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlmtu", VnetHdr: true, MTU: 9000})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	mtu := func() int {
		ifi, err := net.InterfaceByName("nctlmtu")
		if err != nil {
			t.Fatal(err)
		}
		return ifi.MTU
	}
	if got := mtu(); got != 9000 {
		t.Errorf("MTU %d, want the 9000 asked for", got)
	}
	for _, bad := range []int{70000, 65522, 67, 0, -1} {
		if err := tap.SetMTU(bad); !errors.Is(err, macvtap.ErrInvalid) || !strings.Contains(err.Error(), "68 to 65521") {
			t.Errorf("SetMTU(%d): %v, want ErrInvalid naming 68 to 65521", bad, err)
		}
	}
	if err := macvtap.SetLinkMTU("nctlmtu", 70000); !errors.Is(err, macvtap.ErrInvalid) {
		t.Errorf("SetLinkMTU(70000): %v, want ErrInvalid", err)
	}
	// The kernel's own limit: 65522 passes netctl's general check but not tun's.
	if err := macvtap.SetLinkMTU("nctlmtu", 65522); !errors.Is(err, macvtap.ErrInvalid) {
		t.Errorf("SetLinkMTU(65522) on a tap: %v, want ErrInvalid", err)
	}
	if got := mtu(); got != 9000 {
		t.Errorf("MTU %d after the refused calls, want 9000", got)
	}
	if err := tap.SetMTU(65521); err != nil || mtu() != 65521 {
		t.Errorf("SetMTU(65521): %v, MTU now %d", err, mtu())
	}
}
