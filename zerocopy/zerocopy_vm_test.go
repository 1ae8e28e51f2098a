package zerocopy

import (
	"os/exec"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// reloadVhostNet reloads vhost_net in the VM with the given parameters.
func reloadVhostNet(t *testing.T, params ...string) {
	t.Helper()
	if out, err := exec.Command("rmmod", "vhost_net").CombinedOutput(); err != nil {
		t.Fatalf("rmmod vhost_net: %v: %s", err, out)
	}
	if out, err := exec.Command("insmod", append([]string{"/mods/vhost_net.ko"}, params...)...).CombinedOutput(); err != nil {
		t.Fatalf("insmod vhost_net %v: %v: %s", params, err, out)
	}
}

// TestVMZeroCopyState needs vhost_net (to reload it with and without
// zero-copy) and veth (a lower device that qualifies). Every kernel of the
// matrix has both, so there is no check for a kernel without them: on such
// a kernel Require fails the test instead of letting it pass unchecked.
func TestVMZeroCopyState(t *testing.T) {
	k := testenv.Require(t, "vhost_net", nil)
	testenv.Require(t, "veth", nil)
	s, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Loaded || s.Enabled {
		t.Fatalf("kernel %s, vhost_net as loaded at boot: %+v, want loaded with zero-copy off", k.Name, s)
	}
	reloadVhostNet(t, "experimental_zcopytx=1")
	defer reloadVhostNet(t)
	if s, err = Read(); err != nil || !s.Enabled {
		t.Errorf("after insmod vhost_net experimental_zcopytx=1: %+v, %v", s, err)
	}
	// A veth lower device does scatter-gather and high DMA.
	testenv.Host(t)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "zcv0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "zcv0p"}); err != nil {
		t.Fatal(err)
	}
	f, err := macvtap.ReadFeatures("zcv0")
	if err != nil {
		t.Fatal(err)
	}
	if e := Check(macvtap.KindMacvtap, f); !e.Eligible {
		t.Errorf("macvtap on a veth: %+v (features on: %v)", e, f.On())
	}
}
