package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// vduseFacts are what a VDUSE net device answers on Linux 6.12 (kernel
// facts §3.6: backend features 0xE, one group, one address space, no
// GET_VRING_GROUP), with the test device's features (no CTRL_VQ: VDUSE
// refuses it).
func vduseFacts() host.VDPAFacts {
	f := virtio.Version1 | virtio.AccessPlatform | virtio.NetMAC | virtio.NetStatus | virtio.NetMTU | virtio.NetMrgRxbuf | virtio.EventIdx
	return host.VDPAFacts{BackendFeatures: "0xe", Features: fmt.Sprintf("%#x", uint64(f)), VQs: 2, Groups: 1, AddressSpaces: 1}
}

// cvqFacts: a device with a control virtqueue (2 queue pairs + CVQ) in
// its own group and two address spaces, offering SUSPEND and RESUME (as
// mlx5_vdpa does).
func cvqFacts(own bool) host.VDPAFacts {
	f := virtio.Version1 | virtio.AccessPlatform | virtio.NetMAC | virtio.NetStatus | virtio.NetMrgRxbuf |
		virtio.NetCtrlVQ | virtio.NetMQ | virtio.NetCtrlMACAddr | virtio.NetCsum | virtio.NetHostTSO4
	return host.VDPAFacts{BackendFeatures: "0x3e", Features: fmt.Sprintf("%#x", uint64(f)), VQs: 5, Groups: 2, AddressSpaces: 2, CVQOwnGroup: &own}
}

func withFeatures(f host.VDPAFacts, add, del virtio.Features) host.VDPAFacts {
	w, _ := host.Word(f.Features)
	f.Features = fmt.Sprintf("%#x", uint64((virtio.Features(w)|add)&^del))
	return f
}

// TestVDPAMigration: which facts give which answer with which QEMU.
// QEMU 7.2 (Debian 12) never migrates vhost-vdpa without x-svq=on; from
// 8.2 a device migrates when shadow virtqueues can drive it and, with a
// control virtqueue, that queue can be put in its own address space.
func TestVDPAMigration(t *testing.T) {
	vd := vduseFacts()
	noASID := cvqFacts(true)
	noASID.BackendFeatures = "0x6"
	noGroups := cvqFacts(true)
	noGroups.CVQOwnGroup, noGroups.GroupError = nil, "VHOST_VDPA_GET_VRING_GROUP: operation not supported"
	oneAS := cvqFacts(true)
	oneAS.AddressSpaces = 1
	cases := []struct {
		name    string
		qemu    string
		facts   host.VDPAFacts
		ok      bool
		suspend bool
		want    []string // in the reason
	}{
		{"VDUSE, QEMU 7.2", "7.2.22", vd, false, false,
			[]string{"QEMU 7.2.22", "x-svq=on", `"Migration disabled: vhost lacks VHOST_F_LOG_ALL feature."`, "QEMU 8.2 and later would migrate it"}},
		{"VDUSE, QEMU 6.2: no shadow virtqueues at all", "6.2.0", vd, false, false,
			[]string{"QEMU 6.2.0 has no shadow virtqueues", `"Migration disabled: vhost lacks VHOST_F_LOG_ALL feature."`}},
		{"VDUSE, QEMU 9.2", "9.2.0", vd, true, false,
			[]string{"no control virtqueue", "no VHOST_BACKEND_F_SUSPEND", "reset"}},
		{"VDUSE, no QEMU found", "", vd, false, false,
			[]string{"no QEMU on this host", "QEMU 8.2 and later would migrate it"}},
		{"CVQ in its own group, QEMU 9.2", "9.2.0", cvqFacts(true), true, true,
			[]string{"control virtqueue in its own group", "SUSPEND"}},
		{"CVQ in its own group, QEMU 8.1: CVQ blocker", "8.1.5", cvqFacts(true), false, true,
			[]string{`"net vdpa cannot migrate with CVQ feature"`, "8.2"}},
		{"CVQ, QEMU 7.2", "7.2.22", cvqFacts(true), false, true,
			[]string{"x-svq=on", "QEMU 8.2 and later would migrate it"}},
		{"CVQ sharing a group", "9.2.0", cvqFacts(false), false, true,
			[]string{"control virtqueue shares a virtqueue group with the data virtqueues", "VHOST_VDPA_GET_VRING_GROUP"}},
		{"CVQ without IOTLB_ASID", "9.2.0", noASID, false, false,
			[]string{"VHOST_BACKEND_F_IOTLB_ASID"}},
		{"CVQ with one address space", "9.2.0", oneAS, false, true,
			[]string{"1 address space"}},
		{"CVQ groups unreadable", "9.2.0", noGroups, false, true,
			[]string{"could not be read", "operation not supported"}},
		{"INDIRECT_DESC", "9.2.0", withFeatures(vd, virtio.IndirectDesc, 0), false, false,
			[]string{fmt.Sprintf(`"SVQ Invalid device feature flags, offer: %#x, ok: %#x"`,
				uint64(mustWord(withFeatures(vd, virtio.IndirectDesc, 0).Features)), uint64(mustWord(vd.Features)))}},
		{"no VERSION_1", "9.2.0", withFeatures(vd, 0, virtio.Version1), false, false,
			[]string{`"SVQ Invalid device feature flags`, fmt.Sprintf("ok: %#x", mustWord(vd.Features))}},
		{"HOST_USO: outside the net set", "9.2.0", withFeatures(vd, virtio.NetHostUSO, 0), false, false,
			[]string{fmt.Sprintf(`"vdpa svq does not work with features %#x"`, uint64(virtio.NetHostUSO))}},
		{"a QEMU version that does not parse", "9", vd, false, false, []string{"unknown: QEMU version"}},
		{"ORDER_PLATFORM is fine from 8.0", "9.2.0", withFeatures(vd, virtio.OrderPlatform, 0), true, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := VDPAMigration(c.qemu, c.facts)
			if m.OK != c.ok || m.Suspend != c.suspend {
				t.Errorf("ok %v suspend %v, want %v %v: %s", m.OK, m.Suspend, c.ok, c.suspend, m.Reason)
			}
			for _, w := range c.want {
				if !strings.Contains(m.Reason, w) {
					t.Errorf("reason %q lacks %q", m.Reason, w)
				}
			}
			if m.Reason == "" || m.Facts == nil || *m.Facts != c.facts {
				t.Errorf("reason %q, facts %+v: want a reason and the facts", m.Reason, m.Facts)
			}
		})
	}
}

// TestVDPAMigrationBadFacts: facts that do not parse (another host's
// document) give an unknown answer, not a panic or a yes.
func TestVDPAMigrationBadFacts(t *testing.T) {
	for _, f := range []host.VDPAFacts{{}, {BackendFeatures: "0xe", Features: "zz"}, {BackendFeatures: "e", Features: "0x1"}} {
		m := VDPAMigration("9.2.0", f)
		if m.OK || !strings.HasPrefix(m.Reason, "unknown: ") {
			t.Errorf("%+v: %+v", f, m)
		}
	}
}

func mustWord(s string) uint64 {
	w, ok := host.Word(s)
	if !ok {
		panic(s)
	}
	return w
}

// FuzzVDPAMigration: any facts and version give an answer with a reason,
// never a panic; a yes needs facts that parse and a QEMU of 8.0 or later.
func FuzzVDPAMigration(f *testing.F) {
	f.Add("9.2.0", "0x3e", "0x3004a0829", uint32(5), uint32(2), uint32(2), true, true)
	f.Add("7.2.22", "0xe", "0x300030028", uint32(2), uint32(1), uint32(1), false, false)
	f.Fuzz(func(t *testing.T, qemu, backend, feats string, vqs, groups, ases uint32, haveCVQ, own bool) {
		facts := host.VDPAFacts{BackendFeatures: backend, Features: feats, VQs: vqs, Groups: groups, AddressSpaces: ases}
		if haveCVQ {
			facts.CVQOwnGroup = &own
		}
		m := VDPAMigration(qemu, facts)
		if m.Reason == "" {
			t.Fatal("no reason")
		}
		if m.OK && (!atLeast(qemu, "8.0") || m.Facts == nil) {
			t.Fatalf("yes for QEMU %q: %+v", qemu, m)
		}
	})
}

// TestPlanNotesVDPAMigration: a plan says, per host, when the vdpa
// device Decide chose there cannot live-migrate with that host's QEMU, and
// why (in Notes and in vdpa_migration); a host whose device can, or that
// chose vhost-net, gets no such note; a probe that did not say (older
// netctl, or attach's) is noted as not known.
func TestPlanNotesVDPAMigration(t *testing.T) {
	vdpaHost := load(t, "probe-6.12-vdpa.json") // the VDUSE device, no QEMU in the VM
	res, err := Plan([]*host.Description{vdpaHost, load(t, "probe-6.1.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backends["vm-6-12-vdpa"] != BackendVDPA || res.Backends["vm-6-1"] != BackendVhostNet {
		t.Fatalf("backends %v", res.Backends)
	}
	why := res.VDPAMigration["vm-6-12-vdpa"]
	if !strings.HasPrefix(why, "vdpa device probevdpa0 cannot live-migrate: no QEMU on this host") || len(res.VDPAMigration) != 1 {
		t.Errorf("vdpa_migration %v", res.VDPAMigration)
	}
	if !slices.Contains(res.Notes, "vm-6-12-vdpa: "+why) {
		t.Errorf("notes %q lack %q", res.Notes, why)
	}
	// The same device with QEMU 9.2 on the host: it can.
	ok := load(t, "probe-6.12-vdpa.json")
	ok.QEMU = host.QEMU{Version: "9.2.0"}
	m := VDPAMigration("9.2.0", *ok.VDPA.Devices[0].Migration.Facts)
	ok.VDPA.Devices[0].Migration = &m
	res, err = Plan([]*host.Description{ok}, Request{})
	if err != nil || len(res.VDPAMigration) != 0 || slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "migrate") }) {
		t.Errorf("QEMU 9.2: %v, %q, %v", res.VDPAMigration, res.Notes, err)
	}
	// The VM has no QEMU: --qemu names the version to assume there.
	res, _ = Plan([]*host.Description{vdpaHost}, Request{QEMU: "9.2.0"})
	if len(res.VDPAMigration) != 0 {
		t.Errorf("--qemu 9.2.0: %v", res.VDPAMigration)
	}
	res, _ = Plan([]*host.Description{vdpaHost}, Request{QEMU: "7.2.22"})
	if why := res.VDPAMigration["vm-6-12-vdpa"]; !strings.Contains(why, "QEMU 7.2.22 migrates vhost-vdpa only with") {
		t.Errorf("--qemu 7.2.22: %q", why)
	}
	// A probe that did not look.
	old := load(t, "probe-6.12-vdpa.json")
	old.VDPA.Devices[0].Migration = nil
	res, _ = Plan([]*host.Description{old}, Request{})
	if why := res.VDPAMigration["vm-6-12-vdpa"]; !strings.Contains(why, "not known") || !strings.Contains(why, "netctl probe") {
		t.Errorf("no answer in the probe: %q", why)
	}
}
