package macvtap_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// lowerVeth makes a veth pair to put macvtaps on.
func lowerVeth(t *testing.T, name string) {
	t.Helper()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{name, name + "p"} {
		l, _ := netlink.LinkByName(n)
		netlink.LinkSetUp(l)
	}
}

func TestHostMacvtapEveryMode(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlv0")
	fds := testenv.OpenFDs(t)
	for _, mode := range []macvtap.Mode{macvtap.ModeBridge, macvtap.ModeVEPA, macvtap.ModePrivate, macvtap.ModePassthru, macvtap.ModeSource} {
		func() { // not t.Run: a subtest runs on another thread, outside this namespace
			mac, _ := net.ParseMAC("02:00:00:00:10:01")
			cfg := macvtap.MacvtapConfig{Name: "nctlmv%d", Lower: "nctlv0", Mode: mode, MAC: mac, Queues: 2, VnetHdrSize: 12,
				DevDir: t.TempDir()}
			if mode == macvtap.ModeSource {
				src, _ := net.ParseMAC("02:00:00:00:20:01")
				cfg.SourceMACs = []net.HardwareAddr{src}
			}
			m, err := macvtap.CreateMacvtap(cfg)
			if err != nil {
				t.Fatalf("%v: %v", mode, err)
			}
			if m.Queues() != 2 || !strings.HasPrefix(m.Name(), "nctlmv") {
				t.Errorf("%s with %d queues", m.Name(), m.Queues())
			}
			l, err := netlink.LinkByName(m.Name())
			if err != nil {
				t.Fatal(err)
			}
			wantMAC := mac.String()
			if mode == macvtap.ModePassthru { // passthru takes the lower device's address
				lower, _ := netlink.LinkByName("nctlv0")
				wantMAC = lower.Attrs().HardwareAddr.String()
			}
			mv, ok := l.(*netlink.Macvtap)
			if !ok || mv.Attrs().HardwareAddr.String() != wantMAC || mv.Attrs().Flags&net.FlagUp == 0 {
				t.Errorf("%v: MAC %s (want %s), flags %v", mode, l.Attrs().HardwareAddr, wantMAC, l.Attrs().Flags)
			}
			if n, err := m.VnetHdrSize(); err != nil || n != 12 {
				t.Errorf("header size %d, %v", n, err)
			}
			if f, err := m.Flags(); err != nil || f&linux.IFF_VNET_HDR == 0 {
				t.Errorf("flags %#x, %v", f, err)
			}
			if err := m.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadUSO4 | macvtap.OffloadUSO6); err != nil {
				t.Error(err)
			}
			if err := m.SetOffloads(macvtap.OffloadTSO4); err == nil {
				t.Error("TSO4 without CSUM accepted (macvtap would have ignored it silently)")
			}
			name := m.Name()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := netlink.LinkByName(name); err == nil {
				t.Errorf("%s still exists after Close", name)
			}
		}()
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after all modes, %d before", n, fds)
	}
}

func TestHostMacvtapBadInputCreatesNothing(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlv1")
	fds := testenv.OpenFDs(t)
	before, _ := netlink.LinkList()
	for _, c := range []struct {
		cfg  macvtap.MacvtapConfig
		want string
	}{
		{macvtap.MacvtapConfig{Lower: "nosuchdev"}, `lower device "nosuchdev" does not exist`},
		{macvtap.MacvtapConfig{Lower: "nctlv1", Mode: macvtap.Mode(9)}, "unknown mode 9"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", Queues: 257}, "a macvtap has 1 to 256"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", Queues: -1}, "a macvtap has 1 to 256"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", MTU: 70000}, "takes 68 to 1500"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", MTU: 67}, "takes 68 to 1500"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", VnetHdrSize: 16}, "use 10 (legacy), 12"},
		{macvtap.MacvtapConfig{}, "no lower device"},
		{macvtap.MacvtapConfig{Lower: "nctlv1", SourceMACs: []net.HardwareAddr{{2, 0, 0, 0, 0, 1}}}, "need mode source"},
		{macvtap.MacvtapConfig{Name: "nctlv1p", Lower: "nctlv1"}, "already exists"},
	} {
		_, err := macvtap.CreateMacvtap(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if want := map[bool]error{true: macvtap.ErrConflict, false: macvtap.ErrInvalid}[c.want == "already exists"]; !errors.Is(err, want) {
			t.Errorf("%+v: %v does not wrap %v", c.cfg, err, want)
		}
	}
	if _, err := macvtap.ParseMode("bridged"); err == nil || !strings.Contains(err.Error(), "use bridge, vepa") {
		t.Errorf("ParseMode: %v", err)
	}
	// A passthru macvtap owns its lower device: a second one fails, and
	// its half-made link is gone.
	p1, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlpt0", Lower: "nctlv1", Mode: macvtap.ModePassthru})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlpt1", Lower: "nctlv1", Mode: macvtap.ModePassthru}); !errors.Is(err, macvtap.ErrBusy) {
		t.Errorf("a second passthru macvtap on one lower device: %v, want ErrBusy", err)
	}
	p1.Close()
	after, _ := netlink.LinkList()
	if len(after) != len(before) {
		t.Errorf("%d links before, %d after the refused creates", len(before), len(after))
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the refused creates, %d before", n, fds)
	}
}

// vethPair makes a veth pair NAME / NAMEp, both up.
func vethPair(name string) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: name + "p"}); err != nil {
		return err
	}
	for _, n := range []string{name, name + "p"} {
		l, err := netlink.LinkByName(n)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}
