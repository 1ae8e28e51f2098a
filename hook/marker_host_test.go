package hook

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/state"
)

// TestHostHookTapMarker: on the real kernel, a tap the hook's CreateTap
// makes carries the alias TapAlias and MarkedTapIndex finds it; a tap made
// by hand under a name the domain names does not, so a reconnect without
// a record does not record it and the release leaves it (before the
// marker, the reconnect recorded it as netctl's and the release deleted
// it).
func TestHostHookTapMarker(t *testing.T) {
	testenv.Host(t)
	dev := RealDevices{}
	ix, err := dev.CreateTap(tapSpec(Interface{Kind: KindTap, Name: "nchook0", Queues: 2}, 0))
	if err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName("nchook0")
	if err != nil || l.Attrs().Alias != TapAlias || l.Attrs().Index != ix {
		t.Fatalf("hook's tap: %+v, %v; want alias %q, ifindex %d", l, err, TapAlias, ix)
	}
	if got := dev.MarkedTapIndex("nchook0"); got != ix {
		t.Errorf("MarkedTapIndex(hook's tap) = %d, want %d", got, ix)
	}
	if err := dev.DeleteLink("nchook0", ix); err != nil {
		t.Fatal(err)
	}

	// The operator's tap, under the name netctl-all.xml gives its
	// managed='no' interface.
	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vm1tap0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	handIx := linkIndexForTest(t, "vm1tap0")
	if got := dev.MarkedTapIndex("vm1tap0"); got != 0 {
		t.Errorf("MarkedTapIndex(operator's tap) = %d, want 0", got)
	}
	run := filepath.Join(t.TempDir(), "run")
	st, err := state.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	h := &Hook{Config: cfgWith(t, `{"vdpa_dir": "`+filepath.Join(run, "vdpa")+`"}`), Store: st, Devices: dev}
	xml := bytes.ReplaceAll(sample(t, "netctl-all.xml"), []byte("/run/netctl/vdpa"), []byte(h.Config.VDPADir))
	ctx := context.Background()
	res, err := h.Run(ctx, "netctl-all", "reconnect", "begin", bytes.NewReader(xml))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reconnect: %v", res.Done)
	if _, err := h.Run(ctx, "netctl-all", "release", "end", nil); err != nil {
		t.Fatal(err)
	}
	if got := linkIndexForTest(t, "vm1tap0"); got != handIx {
		t.Errorf("the operator's tap vm1tap0 after reconnect and release: ifindex %d, want %d (kept)", got, handIx)
	}
}

func linkIndexForTest(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0
	}
	return l.Attrs().Index
}

// TestHostHookReleaseLeavesUnmarkedTap: a domain's record names tap
// vm1tap0 with its ifindex, but the tap there carries no netctl mark (its
// alias was taken off, or the record was written by hand over the
// operator's tap): release leaves it and says so. Before hostnic's
// DeleteTap, release deleted any link with the recorded name and
// ifindex.
func TestHostHookReleaseLeavesUnmarkedTap(t *testing.T) {
	testenv.Host(t)
	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vm1tap0", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	ix := linkIndexForTest(t, "vm1tap0")
	run := filepath.Join(t.TempDir(), "run")
	st, err := state.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := state.NetNS()
	rec := &state.Domain{Schema: state.DomainSchema, Name: "netctl-all", Status: state.DomainStarted, NetNS: ns,
		Taps: []state.HookTap{{Link: state.Link{Name: "vm1tap0", Ifindex: ix, Created: true}, Owner: NoOwner}}}
	if err := st.SaveDomain(rec); err != nil {
		t.Fatal(err)
	}
	h := &Hook{Config: cfgWith(t, `{"vdpa_dir": "`+filepath.Join(run, "vdpa")+`"}`), Store: st, Devices: RealDevices{}}
	res, err := h.Run(context.Background(), "netctl-all", "release", "end", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := linkIndexForTest(t, "vm1tap0"); got != ix {
		t.Errorf("the unmarked tap vm1tap0 after release: ifindex %d, want %d (kept)", got, ix)
	}
	if len(res.Done) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "left alone") {
		t.Errorf("release said done %q, notes %q; want one note that the tap is left alone", res.Done, res.Notes)
	}
}
