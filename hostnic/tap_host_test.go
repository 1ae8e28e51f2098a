package hostnic

import (
	"errors"
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/state"
)

func tuntap(t *testing.T, name string) *netlink.Tuntap {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil
	}
	tt, ok := l.(*netlink.Tuntap)
	if !ok {
		t.Fatalf("%s is a %s link, not a tap", name, l.Type())
	}
	return tt
}

// TestHostTapCreateIdentifyDelete: CreateTap makes a persistent
// multiqueue vnet_hdr tap with the owner, MTU and netctl's alias and
// holds no fd of it; MarkedTapIndex finds it; a second CreateTap of the
// name is refused and changes nothing; DeleteTap deletes it only with
// its own ifindex. A tap without netctl's alias (the operator's), or one
// that was deleted and made again under the name (another ifindex), is
// never deleted; DeleteLink (by ifindex alone) would have deleted the
// unmarked one.
func TestHostTapCreateIdentifyDelete(t *testing.T) {
	testenv.Host(t)
	h := Real{}
	fds := testenv.OpenFDs(t)
	ix, err := h.CreateTap(PersistentTap{Name: "nchn0", Queues: 2, MTU: 1400, Owner: 4242})
	if err != nil {
		t.Fatal(err)
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("CreateTap left %d fd(s) open", n-fds)
	}
	tt := tuntap(t, "nchn0")
	if tt == nil || tt.Index != ix || tt.Alias != TapAlias || tt.MTU != 1400 || tt.Owner != 4242 || tt.NonPersist ||
		tt.Flags&netlink.TUNTAP_VNET_HDR == 0 || tt.Flags&netlink.TUNTAP_MULTI_QUEUE == 0 {
		t.Fatalf("tap %+v; want ifindex %d, alias %q, mtu 1400, owner 4242, persistent, vnet_hdr, multi_queue", tt, ix, TapAlias)
	}
	if got := h.MarkedTapIndex("nchn0"); got != ix {
		t.Errorf("MarkedTapIndex = %d, want %d", got, ix)
	}
	if _, err := h.CreateTap(PersistentTap{Name: "nchn0", Owner: NoOwner}); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("CreateTap of an existing name: %v, want ErrConflict", err)
	}
	if tt := tuntap(t, "nchn0"); tt == nil || tt.Index != ix || tt.Owner != 4242 {
		t.Errorf("the refused CreateTap changed the tap: %+v", tt)
	}
	if ok, err := h.DeleteTap("nchn0", ix+1000); ok || err != nil || tuntap(t, "nchn0") == nil {
		t.Errorf("DeleteTap with another ifindex: %v; the tap must stay", err)
	}
	if ok, err := h.DeleteTap("nchn0", 0); ok || err != nil || tuntap(t, "nchn0") == nil {
		t.Errorf("DeleteTap with no ifindex: %v; the tap must stay", err)
	}
	if ok, err := h.DeleteTap("nchn0", ix); !ok || err != nil || tuntap(t, "nchn0") != nil {
		t.Fatalf("DeleteTap of netctl's tap: %v; want it gone", err)
	}
	if ok, err := h.DeleteTap("nchn0", ix); ok || err != nil {
		t.Errorf("DeleteTap of a tap that is gone: %v", err)
	}

	// Deleted and made again under the name: a new ifindex.
	old, err := h.CreateTap(PersistentTap{Name: "nchn1", Owner: NoOwner})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteLink("nchn1", old); err != nil {
		t.Fatal(err)
	}
	again, err := h.CreateTap(PersistentTap{Name: "nchn1", Owner: NoOwner})
	if err != nil {
		t.Fatal(err)
	}
	if again == old {
		t.Fatalf("the kernel gave the same ifindex %d again", old)
	}
	if ok, err := h.DeleteTap("nchn1", old); ok || err != nil || tuntap(t, "nchn1") == nil {
		t.Errorf("DeleteTap with the old ifindex: %v; the new tap must stay", err)
	}

	// The operator's tap: no alias.
	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vm1tap0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	hand := tuntap(t, "vm1tap0")
	if got := h.MarkedTapIndex("vm1tap0"); got != 0 {
		t.Errorf("MarkedTapIndex(operator's tap) = %d, want 0", got)
	}
	if ok, err := h.DeleteTap("vm1tap0", hand.Index); ok || err != nil || tuntap(t, "vm1tap0") == nil {
		t.Errorf("DeleteTap of the operator's tap (its own ifindex): %v; it must stay", err)
	}
	// A link of another type with netctl's alias: not a tap.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nchn2"}, PeerName: "nchn2p"}); err != nil {
		t.Fatal(err)
	}
	d, _ := netlink.LinkByName("nchn2")
	netlink.LinkSetAlias(d, TapAlias)
	if got := h.MarkedTapIndex("nchn2"); got != 0 {
		t.Errorf("MarkedTapIndex(a veth with the alias) = %d, want 0", got)
	}
	if ok, err := h.DeleteTap("nchn2", d.Attrs().Index); ok || err != nil || !h.LinkExists("nchn2", d.Attrs().Index) {
		t.Errorf("DeleteTap of a veth: %v; it must stay", err)
	}
}

// TestHostOpenTap: OpenTap creates a multiqueue vnet_hdr tap with the
// MAC, up, that goes away with its last fd; opens an existing tap's
// queues and leaves the tap on Release; refuses a link that is not a tap
// and a name that is not there (ErrInvalid), creating nothing.
func TestHostOpenTap(t *testing.T) {
	testenv.Host(t)
	h := Real{}
	fds := testenv.OpenFDs(t)
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 7}
	b, err := h.OpenTap(TapSpec{Name: TapTemplate, Create: true, Queues: 2, MTU: 1400, MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	tt := tuntap(t, b.Name())
	if tt == nil || tt.Index != b.Ifindex() || b.Queues() != 2 || tt.MTU != 1400 || tt.HardwareAddr.String() != mac.String() ||
		tt.Flags&netlink.TUNTAP_VNET_HDR == 0 || tt.Flags&netlink.TUNTAP_MULTI_QUEUE == 0 {
		t.Fatalf("tap %+v (queues %d)", tt, b.Queues())
	}
	if NotCreatedLink("tap", &state.Link{Name: b.Name(), Ifindex: b.Ifindex()}) != "" {
		t.Errorf("%s is not a name netctl's records accept as netctl's", b.Name())
	}
	if err := b.Destroy(); err != nil {
		t.Fatal(err)
	}
	if h.LinkExists(b.Name(), b.Ifindex()) {
		t.Errorf("Destroy left %s", b.Name())
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fd(s) left open", n-fds)
	}

	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vm1tap0", VnetHdr: true, Queues: 2, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	b, err = h.OpenTap(TapSpec{Name: "vm1tap0", Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil || !h.LinkExists("vm1tap0", b.Ifindex()) {
		t.Errorf("Release: %v; the tap must stay", err)
	}
	for _, name := range []string{"lo", "nosuch0"} {
		if _, err := h.OpenTap(TapSpec{Name: name, Queues: 1}); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("OpenTap(%s): %v, want ErrInvalid", name, err)
		}
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fd(s) left open", n-fds)
	}
}

// TestHostMacvtap: CreateMacvtap names it from the template on the
// lower device with the guest's MAC; FindMacvtap finds it only by all
// three; Destroy deletes it; a missing lower device leaves nothing.
func TestHostMacvtap(t *testing.T) {
	testenv.Host(t)
	h := Real{}
	for _, n := range []string{"lower0", "lower1"} {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n}, PeerName: n + "p"}); err != nil {
			t.Fatal(err)
		}
		testenv.LinkUp(t, n)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	b, err := h.CreateMacvtap(MacvtapSpec{Lower: "lower0", Mode: macvtap.ModeBridge, Queues: 2, MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if NotCreatedLink("macvtap", &state.Link{Name: b.Name(), Ifindex: b.Ifindex()}) != "" || b.Queues() != 2 {
		t.Errorf("macvtap %s#%d with %d queues", b.Name(), b.Ifindex(), b.Queues())
	}
	if got := h.FindMacvtap(b.Name(), "lower0", mac); got != b.Ifindex() {
		t.Errorf("FindMacvtap = %d, want %d", got, b.Ifindex())
	}
	other := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x57}
	if h.FindMacvtap(b.Name(), "lower1", mac) != 0 || h.FindMacvtap(b.Name(), "lower0", other) != 0 || h.FindMacvtap("lower0", "lower0", mac) != 0 {
		t.Errorf("FindMacvtap found a macvtap by the wrong lower device, MAC or name")
	}
	if err := b.Destroy(); err != nil || h.LinkExists(b.Name(), 0) {
		t.Errorf("Destroy: %v; want %s gone", err, b.Name())
	}
	if _, err := h.CreateMacvtap(MacvtapSpec{Lower: "nosuch0", Mode: macvtap.ModeBridge, Queues: 1, MAC: mac}); err == nil {
		t.Errorf("CreateMacvtap on a missing lower device succeeded")
	}
	ls, _ := netlink.LinkList()
	for _, l := range ls {
		if l.Type() == "macvtap" {
			t.Errorf("macvtap %s left", l.Attrs().Name)
		}
	}
}
