package macvtap_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostProbeOffloadsNeverTouchesLiveDevices: ProbeOffloads tries every
// offload on scratch devices of its own. A tap and a macvtap that carry a
// guest's traffic in the caller's namespace see no feature change (no
// RTM_NEWLINK) while it probes, keep their offloads, and the namespace
// gains no link and the process no fd.
func TestHostProbeOffloadsNeverTouchesLiveDevices(t *testing.T) {
	testenv.Host(t)
	lowerVeth(t, "nctlpl0")
	live, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlpl1", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlpl2", Lower: "nctlpl0", DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close()
	for _, b := range []macvtap.Backend{live, mv} {
		if err := b.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4); err != nil {
			t.Fatal(err)
		}
	}
	links, _ := netlink.LinkList()
	fds := testenv.OpenFDs(t)
	updates := make(chan netlink.LinkUpdate, 1024)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.LinkSubscribe(updates, done); err != nil {
		t.Fatal(err)
	}
	// events counts link messages about the live devices until quiet.
	events := func() int {
		n := 0
		for {
			select {
			case u := <-updates:
				if name := u.Link.Attrs().Name; name == "nctlpl1" || name == "nctlpl2" {
					n++
				}
			case <-time.After(300 * time.Millisecond):
				return n
			}
		}
	}
	// The watch sees an offload change on a live device (so silence below
	// means something).
	if err := live.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4 | macvtap.OffloadTSO6); err != nil {
		t.Fatal(err)
	}
	if n := events(); n == 0 {
		t.Fatal("no RTM_NEWLINK for an offload change: the watch cannot see probing")
	}
	live.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4)
	events()

	for _, k := range []macvtap.Kind{macvtap.KindTap, macvtap.KindMacvtap, macvtap.KindPacket} {
		o, err := macvtap.ProbeOffloads(k)
		// This host's kernel is newer than 6.2: everything is taken.
		if err != nil || o != macvtap.OffloadAll {
			t.Errorf("ProbeOffloads(%s) = %v, %v; want %v", k, o, err, macvtap.OffloadAll)
		}
	}
	if n := events(); n != 0 {
		t.Errorf("%d link messages about the live tap and macvtap while probing", n)
	}
	f, err := macvtap.ReadFeatures("nctlpl1")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Active["tx-tcp-segmentation"] || f.Active["tx-tcp6-segmentation"] || f.Active["tx-udp-segmentation"] {
		t.Errorf("live tap's features after probing: %v, want csum and tso4 only", f.On())
	}
	if after, _ := netlink.LinkList(); len(after) != len(links) {
		t.Errorf("%d links after probing, %d before", len(after), len(links))
	}
	// +1: the subscription's socket. Fewer is no leak of the probe's: an
	// earlier test's file dropped without Close may be closed by its
	// finalizer meanwhile (seen once in CI: 12 after, 13 before).
	if n := testenv.OpenFDs(t); n > fds+1 {
		t.Errorf("%d fds open after probing, %d before", n, fds+1)
	} else if n < fds+1 {
		t.Logf("%d fds open after probing, %d before: another test's file closed by the garbage collector", n, fds+1)
	}
	if _, err := macvtap.ProbeOffloads("vhost"); !errors.Is(err, macvtap.ErrInvalid) {
		t.Errorf("ProbeOffloads(vhost): %v, want ErrInvalid", err)
	}
}
