package gather

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/diagnose"
)

// TestHostReadTapFromFDs reads taps and a macvtap the way diagnose reads
// QEMU's: from a process's file descriptors (this test's own), through
// fdinfo, a pidfd_getfd copy and ethtool.
func TestHostReadTapFromFDs(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "diagt0", VnetHdr: true, VnetHdrSize: 12, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if err := tap.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6); err != nil {
		t.Fatal(err)
	}
	s := &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: map[string]string{"ifname": "diagt0"}}}
	readTap(s, os.Getpid())
	if s.Tap == nil || s.Tap.Name != "diagt0" || s.Tap.Queues != 2 || !s.Tap.VnetHdr || s.Tap.HdrLen != 12 || s.Tap.Macvtap ||
		strings.Join(s.Tap.Offloads, " ") != "csum tso4 tso6" || len(s.Errors) > 0 {
		t.Errorf("tap: %+v, errors %v", s.Tap, s.Errors)
	}

	// A second tap: without ifname= diagnose cannot tell which is the NIC's.
	tap2, err := macvtap.CreateTap(macvtap.TapConfig{Name: "diagt1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tap2.Close()
	s = &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap"}}
	readTap(s, os.Getpid())
	if s.Tap != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "holds 2 taps") {
		t.Errorf("two taps, no name: %+v, %v", s.Tap, s.Errors)
	}
	// libvirt names the fd instead (fd=N).
	s = &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: map[string]string{"fd": strconv.Itoa(tap2.FD())}}}
	readTap(s, os.Getpid())
	if s.Tap == nil || s.Tap.Name != "diagt1" || len(s.Errors) > 0 {
		t.Errorf("tap by fd=: %+v, %v", s.Tap, s.Errors)
	}
	s = &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: map[string]string{"ifname": "diagt1"}}}
	readTap(s, os.Getpid())
	if s.Tap == nil || s.Tap.VnetHdr || s.Tap.HdrLen != 10 || len(s.Tap.Offloads) != 0 {
		t.Errorf("tap without header: %+v, %v", s.Tap, s.Errors)
	}

	// A macvtap on a veth, opened through its tapN node.
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "diagv0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "diagv1"}); err != nil {
		t.Fatal(err)
	}
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "diagmv0", Lower: "diagv0", VnetHdrSize: 12, DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()
	if err := mv.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4); err != nil {
		t.Fatal(err)
	}
	s = &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: map[string]string{"fd": strconv.Itoa(mv.FD())}}}
	tap.Close()
	tap2.Close()
	readTap(s, os.Getpid())
	readLower(s, "")
	if s.Tap == nil || s.Tap.Name != "diagmv0" || !s.Tap.Macvtap || s.Tap.HdrLen != 12 || len(s.Errors) > 0 {
		t.Fatalf("macvtap: %+v, %v", s.Tap, s.Errors)
	}
	if !s.Tap.OffloadsUnknown || len(s.Tap.Offloads) != 0 {
		t.Errorf("a macvtap shows no offloads, but netctl read %v", s.Tap.Offloads)
	}
	if s.Lower == nil || s.Lower.Name != "diagv0" || !s.Lower.Features["tx-scatter-gather"] {
		t.Errorf("the macvtap's lower device: %+v", s.Lower)
	}

	// By name, for a bare reply.
	s = &diagnose.Snapshot{}
	if err := ReadTap(s, "diagmv0"); err != nil || !s.Tap.Macvtap || s.Netdev.Type != "tap" {
		t.Errorf("ReadTap: %+v, %v", s.Tap, err)
	}
	if err := ReadTap(&diagnose.Snapshot{}, "diagv0"); err == nil || !strings.Contains(err.Error(), "not a tap or macvtap") {
		t.Errorf("ReadTap of a veth: %v", err)
	}
}
