package hook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/state"
)

const (
	lvUUID      = "6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b"
	lvOtherUUID = "11111111-2222-3333-4444-555555555555"
)

// lvXML is what libvirt writes to the release hook's stdin: the domain's
// XML, with its <uuid>, and nothing netctl's hook manages.
const lvXML = `<domain type='qemu'>
  <name>web1</name>
  <uuid>` + "6A4F3B1E-0D2C-4E8F-9A7B-5C6D7E8F9A0B" + `</uuid>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:01'/>
      <target dev='nctl0' managed='no'/>
      <alias name='ua-netctl-net1'/>
    </interface>
  </devices>
</domain>`

// liveNIC records NIC id, attached by netctl attach --vm to the libvirt
// domain uuid, on a tap the fake made (marked, as hostnic makes it).
func liveNIC(t *testing.T, h *Hook, f *fakeDevices, uuid, id, tap string) *state.NIC {
	t.Helper()
	ix, err := f.CreateTap(hostnic.PersistentTap{Name: tap})
	if err != nil {
		t.Fatal(err)
	}
	n := &state.NIC{Schema: state.Schema, VM: "web1", ID: id, Netdev: "hostua-netctl-" + id, Backend: "userspace", Queues: 1,
		MAC: "52:54:00:00:00:01", Status: state.StatusAttached, Attached: time.Now().UTC(),
		Tap:     &state.Link{Name: tap, Ifindex: ix, Created: true},
		Libvirt: &state.Libvirt{URI: "qemu:///system", UUID: uuid, Alias: "ua-netctl-" + id}}
	n.NetNS, _ = state.NetNS()
	if err := h.Store.Create(n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReleaseDeletesLiveAttached: release end of a libvirt domain deletes
// the taps and records netctl attach --vm made for it (found by the UUID
// in the XML on stdin), also when the hook prepared nothing for the
// domain; another domain's live NIC, and a tap that is no longer the one
// netctl made, are left alone.
func TestReleaseDeletesLiveAttached(t *testing.T) {
	f := newFake(t)
	h, log, _ := newTestHook(t, f)
	ctx := context.Background()
	liveNIC(t, h, f, lvUUID, "net1", "nctl0")
	liveNIC(t, h, f, lvUUID, "net2", "nctl1")
	liveNIC(t, h, f, lvOtherUUID, "net1", "nctl2")
	// nctl1 was deleted and someone else's tap took its name.
	delete(f.marked, "nctl1")
	res, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(lvXML))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 nctl1#12 nctl2#13" {
		t.Errorf("links after release: %s (want nctl0 deleted, the others left)", got)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvUUID), "net1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record net1 after release: %v", err)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvUUID), "net2"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record net2 after release: %v (the domain stopped: the record goes, the tap not netctl's stays)", err)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvOtherUUID), "net1"); err != nil {
		t.Errorf("the other domain's record: %v", err)
	}
	all := strings.Join(append(res.Done, res.Notes...), "\n")
	for _, want := range []string{"deleted tap nctl0 of NIC net1 (netctl attach)", "tap nctl1 of NIC net2 is gone, or is not the tap netctl made"} {
		if !strings.Contains(all, want) {
			t.Errorf("release said %q, want %q", all, want)
		}
	}
	if !strings.Contains(log.String(), "web1 release: deleted tap nctl0 of NIC net1") {
		t.Errorf("log:\n%s", log)
	}
	// Again: nothing left, nothing said.
	if res, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(lvXML)); err != nil || len(res.Done)+len(res.Notes) != 0 {
		t.Errorf("second release: %+v %v", res, err)
	}
}

// TestReleaseAttachedLockBusy: while an attach or detach holds the
// NIC's lock, release waits at most attachedLockWait, leaves the NIC
// to it and still succeeds (libvirt's release is never failed).
func TestReleaseAttachedLockBusy(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	ctx := context.Background()
	liveNIC(t, h, f, lvUUID, "net1", "nctl0")
	l, err := h.Store.Lock(ctx, state.LibvirtLockKey(lvUUID, "net1"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	start := time.Now()
	res, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(lvXML))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > attachedLockWait+2*time.Second {
		t.Errorf("release took %v with the lock held", d)
	}
	if got := f.snapshot(); got != "eth0#2 nctl0#11" {
		t.Errorf("links: %s (want the tap left to the lock's holder)", got)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "netctl detach --vm "+lvUUID+" --id net1") {
		t.Errorf("notes %q", res.Notes)
	}
}

// TestReleaseAttachedOtherNICInFlight: an attach of another NIC of the
// domain holds that NIC's lock while libvirt's hotplug waits for the
// domain's job (a destroy, which runs this release): the NIC attached
// before is still released. Before, one lock per domain made release
// give up on every NIC and leave nctl0 and its record (a fresh-clone
// make test saw it in TestHostLibvirtdAttachFailures).
func TestReleaseAttachedOtherNICInFlight(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	ctx := context.Background()
	liveNIC(t, h, f, lvUUID, "net1", "nctl0")
	l, err := h.Store.Lock(ctx, state.LibvirtLockKey(lvUUID, "net2"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(lvXML)); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("links: %s (want nctl0 deleted: its own lock was free)", got)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvUUID), "net1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("net1's record: %v (want removed)", err)
	}
}

// TestDomainUUID: the release reads the UUID of the root <domain> only,
// canonical lower case; anything else gives "".
func TestDomainUUID(t *testing.T) {
	for in, want := range map[string]string{
		lvXML: lvUUID,
		`<domain><name>x</name><metadata><uuid>` + lvOtherUUID + `</uuid></metadata><uuid>` + lvUUID + `</uuid></domain>`: lvUUID,
		`<domain><uuid>not-a-uuid</uuid></domain>`:       "",
		`<network><uuid>` + lvUUID + `</uuid></network>`: "",
		`<domain><name>x</name>`:                         "",
		"":                                               "",
		`<domain><uuid>` + strings.Repeat("a", 1<<20) + `</uuid></domain>`: "",
	} {
		if got := domainUUID(strings.NewReader(in)); got != want {
			t.Errorf("domainUUID(%.60q) = %q, want %q", in, got, want)
		}
	}
	if got := domainUUID(nil); got != "" {
		t.Errorf("nil reader: %q", got)
	}
}

// liveVDPANIC records NIC id, attached by netctl attach --vm --mgmtdev
// to the libvirt domain uuid, on vdpa device netctl-ID the fake made.
func liveVDPANIC(t *testing.T, h *Hook, f *fakeDevices, uuid, id string) *state.NIC {
	t.Helper()
	name := hostnic.VDPAPrefix + id
	vhost, err := f.CreateVDPA(context.Background(), hostnic.VDPASpec{Name: name, Mgmtdev: "vduse"})
	if err != nil {
		t.Fatal(err)
	}
	ino, _ := f.VDPAIdentity(name)
	n := &state.NIC{Schema: state.Schema, VM: "web1", ID: id, Netdev: "hostua-netctl-" + id, Backend: "vdpa", Queues: 1,
		MAC: "52:54:00:00:00:02", Status: state.StatusAttached, Attached: time.Now().UTC(),
		VDPA:    &state.VDPA{Name: name, Mgmtdev: "vduse", Vhost: vhost, Created: true, Ino: ino},
		Libvirt: &state.Libvirt{URI: "qemu:///system", UUID: uuid, Alias: "ua-netctl-" + id}}
	if err := h.Store.Create(n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReleaseDeletesLiveAttachedVDPA: release end of a libvirt domain
// deletes the vdpa devices netctl attach --vm created for it, as detach
// would (only while each is still the device netctl made), with their
// records; a device someone deleted and added again under the name is
// left, its record removed (the domain is gone); a device netctl did not
// create (attach --vdpa NAME) is never deleted. Before, release deleted
// only taps and left every attached vdpa device behind.
func TestReleaseDeletesLiveAttachedVDPA(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	ctx := context.Background()
	liveVDPANIC(t, h, f, lvUUID, "net3")
	liveVDPANIC(t, h, f, lvUUID, "net4")
	f.recreateVDPA(hostnic.VDPAPrefix + "net4")
	// A device the operator made, attached with --vdpa: not netctl's.
	if _, err := f.CreateVDPA(ctx, hostnic.VDPASpec{Name: "ops0", Mgmtdev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	n := &state.NIC{Schema: state.Schema, VM: "web1", ID: "net5", Netdev: "hostua-netctl-net5", Backend: "vdpa", Queues: 1,
		MAC: "52:54:00:00:00:05", Status: state.StatusAttached, Attached: time.Now().UTC(),
		VDPA:    &state.VDPA{Name: "ops0", Vhost: f.vdpas["ops0"]},
		Libvirt: &state.Libvirt{URI: "qemu:///system", UUID: lvUUID, Alias: "ua-netctl-net5"}}
	if err := h.Store.Create(n); err != nil {
		t.Fatal(err)
	}
	res, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(lvXML))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 vdpa:netctl-net4 vdpa:ops0" {
		t.Errorf("after release: %s (want netctl-net3 deleted, netctl-net4 and ops0 left)", got)
	}
	for _, id := range []string{"net3", "net4", "net5"} {
		if _, err := h.Store.Load(state.LibvirtKey(lvUUID), id); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("record %s after release: %v", id, err)
		}
	}
	all := strings.Join(append(res.Done, res.Notes...), "\n")
	for _, want := range []string{"deleted vdpa device netctl-net3 of NIC net3 (netctl attach)",
		"vdpa device netctl-net4 of NIC net4 is gone, or is not the device netctl made"} {
		if !strings.Contains(all, want) {
			t.Errorf("release said %q, want %q", all, want)
		}
	}
	if strings.Contains(all, "ops0") && !strings.Contains(all, "not netctl's") {
		t.Errorf("release on ops0: %q", all)
	}
}

// TestReleaseAttachedVDPADeleteFails: a vdpa device that cannot be
// deleted keeps its record (netctl detach tries again), and release
// still succeeds.
func TestReleaseAttachedVDPADeleteFails(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	liveVDPANIC(t, h, f, lvUUID, "net3")
	f.failAt = "delvdpa netctl-net3"
	res, err := h.Run(context.Background(), "web1", "release", "end", strings.NewReader(lvXML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvUUID), "net3"); err != nil {
		t.Errorf("record after a failed delete: %v (want kept)", err)
	}
	if all := strings.Join(res.Notes, "\n"); !strings.Contains(all, "injected failure") || !strings.Contains(all, "netctl detach --vm") {
		t.Errorf("release notes %q: want the error and what to do", all)
	}
}
