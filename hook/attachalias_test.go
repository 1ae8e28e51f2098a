package hook

import (
	"context"
	"strings"
	"testing"

	"github.com/netctl/netctl/state"
)

// persistentXML is a domain whose persistent definition holds an
// interface netctl attach --persistent added (alias ua-netctl-net1, the
// tap nctlp... managed='no'), and a managed='no' interface of someone
// else's without that alias.
const persistentXML = `<domain type='qemu'>
  <name>web1</name>
  <uuid>6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b</uuid>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:01'/>
      <target dev='nctlp0011aabb' managed='no'/>
      <model type='virtio'/>
      <driver name='qemu' queues='2'><host csum='on'/></driver>
      <alias name='ua-netctl-net1'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:02'/>
      <target dev='theirs0' managed='no'/>
      <model type='virtio'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:00:00:03'/>
      <target dev='vnet7'/>
      <alias name='ua-netctl-net2'/>
    </interface>
  </devices>
</domain>`

// TestPrepareMakesPersistentAttachedTap: at the next start of a domain
// whose persistent definition holds an interface netctl attach
// --persistent added (its alias ua-netctl-ID, <target managed='no'>),
// prepare makes the tap (netctl's mark, the <driver>'s queues) without
// any netctl metadata (after deleting what the last run left if its
// release did not happen), release deletes it again; an interface without the
// alias, and one with it but libvirt-managed, are left to libvirt.
func TestPrepareMakesPersistentAttachedTap(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	ctx := context.Background()
	// The last run's release did not happen (libvirtd was down): its
	// live record and tap are still there; prepare releases them first.
	liveNIC(t, h, f, lvUUID, "net1", "nctlp0011aabb")
	res, err := h.Run(ctx, "web1", "prepare", "begin", strings.NewReader(persistentXML))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2 nctlp0011aabb#12" {
		t.Errorf("links after prepare: %s (want netctl attach's tap made again)", got)
	}
	if f.MarkedTapIndex("nctlp0011aabb") == 0 {
		t.Errorf("the tap lacks netctl's mark")
	}
	if len(res.Done) != 3 || !strings.Contains(res.Done[0], "deleted tap nctlp0011aabb of NIC net1") || !strings.Contains(res.Done[2], "created tap nctlp0011aabb (ifindex 12, 2 queue(s)") {
		t.Errorf("prepare said %q", res.Done)
	}
	rec, err := h.Store.LoadDomain("web1")
	if err != nil || len(rec.Taps) != 1 || rec.Taps[0].Name != "nctlp0011aabb" {
		t.Fatalf("record %+v %v", rec, err)
	}
	if _, err := h.Run(ctx, "web1", "release", "end", strings.NewReader(persistentXML)); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got != "eth0#2" {
		t.Errorf("links after release: %s", got)
	}
	if _, err := h.Store.LoadDomain("web1"); err == nil {
		t.Errorf("the hook's record stays after release")
	}
}

// TestReconnectLeavesLiveAttachedTap: after a libvirtd restart, reconnect
// does not take a tap that a live netctl attach record holds for a hook
// tap (the record owns it: detach and release delete it).
func TestReconnectLeavesLiveAttachedTap(t *testing.T) {
	f := newFake(t)
	h, _, _ := newTestHook(t, f)
	ctx := context.Background()
	n := liveNIC(t, h, f, lvUUID, "net1", "nctlp0011aabb")
	if _, err := h.Run(ctx, "web1", "reconnect", "begin", strings.NewReader(persistentXML)); err != nil {
		t.Fatal(err)
	}
	if rec, err := h.Store.LoadDomain("web1"); err == nil && len(rec.Taps) != 0 {
		t.Errorf("reconnect recorded %+v as the hook's (netctl attach's record %s holds it)", rec.Taps, n.ID)
	}
	if _, err := h.Store.Load(state.LibvirtKey(lvUUID), "net1"); err != nil {
		t.Errorf("netctl attach's record: %v", err)
	}
}
