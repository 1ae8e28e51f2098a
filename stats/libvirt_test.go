package stats

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
)

const liveXML = `<domain type='qemu' id='3'>
  <name>lv</name>
  <uuid>6a1f0f7e-3c2b-4f5e-9d8a-0123456789ab</uuid>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:79:00:02'/>
      <target dev='lvst0' managed='no'/>
      <model type='virtio'/>
      <driver name='qemu' queues='2'/>
      <alias name='net1'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:79:00:03'/>
      <target dev='vnet3'/>
      <model type='virtio'/>
      <alias name='net0'/>
    </interface>
    <interface type='vdpa'>
      <mac address='52:54:00:79:00:04'/>
      <source dev='/dev/vhost-vdpa-0'/>
      <model type='virtio'/>
      <alias name='net2'/>
    </interface>
    <interface type='ethernet'>
      <mac address='52:54:00:79:00:05'/>
      <target dev='vnet5'/>
      <model type='e1000'/>
      <alias name='net3'/>
    </interface>
  </devices>
</domain>`

// TestDomainTargets: a live XML's virtio interfaces become targets named
// by their alias (QEMU's device id) with the <target dev> as the link;
// <driver name='qemu'> is userspace, no name is vhost-net only when QEMU
// holds /dev/vhost-net fds; vdpa has no link; an e1000 is left out.
func TestDomainTargets(t *testing.T) {
	x, err := libvirtdom.ParseDomain([]byte(liveXML))
	if err != nil {
		t.Fatal(err)
	}
	for _, vhost := range []bool{false, true} {
		ts := domainTargets(x, 42, vhost)
		if len(ts) != 3 {
			t.Fatalf("targets %+v: want net0, net1, net2", ts)
		}
		n0, n1, n2 := ts[0], ts[1], ts[2]
		if n1.NIC != "net1" || n1.Link != "lvst0" || n1.Backend != policy.BackendUserspace || n1.QueuePairs != 2 || n1.NetdevType != "tap" || n1.PID != 42 || n1.Libvirt == nil || n1.Libvirt.Alias != "net1" {
			t.Errorf("net1: %+v", n1)
		}
		want := policy.BackendUserspace
		if vhost {
			want = policy.BackendVhostNet
		}
		if n0.NIC != "net0" || n0.Link != "vnet3" || n0.Backend != want || n0.QueuePairs != 1 {
			t.Errorf("net0 (vhost fds %v): %+v, want backend %s", vhost, n0, want)
		}
		if n2.NIC != "net2" || n2.Backend != policy.BackendVDPA || n2.Link != "" || n2.NetdevType != "vhost-vdpa" {
			t.Errorf("net2: %+v", n2)
		}
	}
	if ts := domainTargets(nil, 0, false); ts != nil {
		t.Errorf("no XML: %v", ts)
	}
}

type fakeLibvirtStats struct {
	st  libvirtdom.IfaceStats
	err error
	dev string
}

func (f *fakeLibvirtStats) InterfaceStats(_ context.Context, dev string) (libvirtdom.IfaceStats, error) {
	f.dev = dev
	return f.st, f.err
}

// TestLibvirtLinkFallback: a libvirt NIC whose tap netctl cannot read
// here takes libvirt's counters (already the guest's way), and says so;
// one whose tap was read keeps the tap's; libvirt's refusal is added to
// the link's reason.
func TestLibvirtLinkFallback(t *testing.T) {
	c := NewCollector(Options{})
	f := &fakeLibvirtStats{st: libvirtdom.IfaceStats{RxPackets: 7, RxBytes: 700, TxPackets: 3, TxBytes: 300, TxDrop: -1}}
	sess := &session{lv: f}
	s := NICStats{Target: Target{NIC: "net0", Link: "vnet0", Libvirt: &LibvirtTarget{Alias: "net0"}}}
	s.missing(SourceLink, "link vnet0 is gone")
	c.libvirtLink(context.Background(), sess, &s)
	if f.dev != "vnet0" || s.Link == nil || s.Link.RX.Packets != 7 || s.Link.TX.Bytes != 300 || s.Link.TX.Drops != 0 || s.LinkFrom != "libvirt" || s.Missing[SourceLink] != "" {
		t.Errorf("fallback: %+v (asked for %q)", s, f.dev)
	}
	own := &LinkStats{RX: Counters{Packets: 1}}
	s = NICStats{Target: s.Target, Link: own}
	f.dev = ""
	c.libvirtLink(context.Background(), sess, &s)
	if s.Link != own || f.dev != "" || s.LinkFrom != "" {
		t.Errorf("a tap read here was replaced: %+v", s)
	}
	f.err = errors.New("no interface vnet0")
	s = NICStats{Target: s.Target}
	s.missing(SourceLink, "link vnet0 is gone")
	c.libvirtLink(context.Background(), sess, &s)
	if s.Link != nil || !strings.Contains(s.Missing[SourceLink], "link vnet0 is gone; libvirt's counters: no interface vnet0") {
		t.Errorf("libvirt's refusal: %+v", s)
	}
}

// TestLibvirtRingsNeedTheOptIn: without --qemu-monitor a libvirt NIC's
// rings and monitor say why they are not read, and nothing is tainted.
func TestLibvirtRingsNeedTheOptIn(t *testing.T) {
	c := NewCollector(Options{})
	s := NICStats{Target: Target{NIC: "net0", Libvirt: &LibvirtTarget{Alias: "net0"}}}
	c.readRings(context.Background(), &session{why: NoMonitorQMPWhy, rings: NoMonitorWhy}, &s)
	if s.Missing[SourceRings] != NoMonitorWhy || !strings.Contains(s.Missing[SourceQMP], "custom-monitor") || s.Tainted {
		t.Errorf("%+v", s)
	}
}

// TestMergeLibvirtRecord: netctl's record of a libvirt NIC (no QEMU pid,
// its own id) and libvirt's listing of the same interface (by alias) are
// one NIC.
func TestMergeLibvirtRecord(t *testing.T) {
	rec := fromRecord(&state.NIC{VM: "lv", ID: "net1", Backend: policy.BackendUserspace,
		Libvirt: &state.Libvirt{URI: "qemu:///system", UUID: "u", Alias: "ua-netctl-net1"}, Tap: &state.Link{Name: "nctl0"}})
	if rec.Libvirt == nil || rec.qomID() != "ua-netctl-net1" {
		t.Fatalf("record target %+v", rec)
	}
	found := []Target{{NIC: "ua-netctl-net1", PID: 9, Libvirt: &LibvirtTarget{UUID: "u", Alias: "ua-netctl-net1"}},
		{NIC: "net0", PID: 9, Libvirt: &LibvirtTarget{UUID: "u", Alias: "net0"}}}
	got := mergeTargets([]Target{rec}, found)
	if len(got) != 2 || got[0].NIC != "net1" || got[1].NIC != "net0" {
		t.Errorf("merged %+v", got)
	}
}
