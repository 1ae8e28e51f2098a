package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

func TestDecideOnTheVMKernels(t *testing.T) {
	new, old := load(t, "probe-6.12.json"), load(t, "probe-6.1.json")
	d, err := Decide(new, Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	if d.Backend != BackendVhostNet || !d.Offer.Has(virtio.NetGuestUSO4|virtio.NetGuestUSO6|virtio.NetHostUSO|virtio.NetGuestTSO4|
		virtio.Version1|virtio.NetMrgRxbuf|virtio.RingReset) {
		t.Errorf("6.12: %s offering %v", d.Backend, d.Offer)
	}
	// vDPA was skipped with its reason: the family is there but nothing is bound.
	if d.Steps[0].Backend != BackendVDPA || d.Steps[0].Chosen || !strings.Contains(d.Steps[0].Reason, "no vdpa device bound") {
		t.Errorf("6.12 steps %+v", d.Steps)
	}
	if len(d.QEMU) != 0 || !strings.Contains(strings.Join(d.Notes, " "), "QEMU version unknown") {
		t.Errorf("6.12: properties %v, notes %v", d.QEMU, d.Notes)
	}
	d, err = Decide(old, Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	if d.Offer.Has(virtio.NetGuestUSO4) || d.Offer.Has(virtio.NetHostUSO) || !d.Offer.Has(virtio.NetGuestTSO4) {
		t.Errorf("6.1 offers %v", d.Offer)
	}
	if why := d.Dropped["GUEST_USO4"]; !strings.Contains(why, "Linux 6.2") || !strings.Contains(why, "6.1.0") {
		t.Errorf("6.1: USO dropped because %q", why)
	}
	// 6.1's vhost-net has no RING_RESET: a ring feature dropped, with its property.
	if d.Offer.Has(virtio.RingReset) || d.QEMU["queue_reset"] != "off" || !strings.Contains(d.Dropped["RING_RESET"], "vhost-net does not offer it") {
		t.Errorf("6.1 RING_RESET: offer %v, properties %v, dropped %q", d.Offer, d.QEMU, d.Dropped["RING_RESET"])
	}
	if d.QEMU["guest_uso4"] != "off" || d.QEMU["host_uso"] != "off" {
		t.Errorf("6.1 QEMU properties %v", d.QEMU)
	}
	if !strings.Contains(d.Steps[0].Reason, "no vdpa support") {
		t.Errorf("6.1 vdpa step %+v", d.Steps[0])
	}
	// Asking for USO on 6.1 is an error that says why.
	if _, err := Decide(old, Request{Enable: virtio.NetGuestUSO4}); err == nil || !strings.Contains(err.Error(), "Linux 6.2") || !errors.Is(err, ErrNotSupported) {
		t.Errorf("USO enabled on 6.1: %v", err)
	}
}

// TestDecideClosedUnderRequirements: a feature whose prerequisite is left
// out (by request or because the tap refuses it) is left out too, with a
// reason and its QEMU property, on every backend.
func TestDecideClosedUnderRequirements(t *testing.T) {
	r := load(t, "probe-6.12.json")
	noCsumTap := *r
	noCsumTap.Tap.Offloads = []string{"tso4", "tso6", "tso_ecn", "ufo", "uso4", "uso6"}
	tso6Only := *r
	tso6Only.Tap.Offloads = []string{"csum", "tso6", "tso_ecn"}
	for _, c := range []struct {
		name    string
		h       *host.Description
		req     Request
		dropped virtio.Features
		kept    virtio.Features
	}{
		{"CSUM disabled", r, Request{Disable: virtio.NetCsum},
			virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetHostUFO | virtio.NetHostUSO,
			virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestECN},
		{"GUEST_CSUM disabled", r, Request{Disable: virtio.NetGuestCsum},
			virtio.NetGuestTSO4 | virtio.NetGuestTSO6 | virtio.NetGuestECN | virtio.NetGuestUFO | virtio.NetGuestUSO4 | virtio.NetGuestUSO6,
			virtio.NetCsum | virtio.NetHostTSO4 | virtio.NetHostECN | virtio.NetHostUSO},
		{"HOST_TSO4 and HOST_TSO6 disabled", r, Request{Disable: virtio.NetHostTSO4 | virtio.NetHostTSO6},
			virtio.NetHostECN, virtio.NetCsum | virtio.NetHostUFO},
		{"userspace path, CSUM disabled", r, Request{Backend: BackendUserspace, Disable: virtio.NetCsum},
			virtio.NetHostTSO4 | virtio.NetHostUSO, virtio.NetGuestTSO4},
		{"tap without csum", &noCsumTap, Request{}, // every receive offload needs TUN_F_CSUM
			virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestECN | virtio.NetGuestUSO4, virtio.NetCsum | virtio.NetHostTSO4},
		{"tap with TSO6 only", &tso6Only, Request{}, // GUEST_ECN still has GUEST_TSO6
			virtio.NetGuestTSO4 | virtio.NetGuestUFO, virtio.NetGuestTSO6 | virtio.NetGuestECN},
	} {
		d, err := Decide(c.h, c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkDecision(t, d, c.req)
		if d.Offer&c.dropped != 0 || !d.Offer.Has(c.kept) {
			t.Errorf("%s: offer %v, want none of %v and all of %v", c.name, d.Offer, c.dropped, c.kept)
		}
	}
	// The reason names the missing prerequisite.
	d, _ := Decide(r, Request{Disable: virtio.NetCsum})
	if why := d.Dropped["HOST_ECN"]; !strings.Contains(why, "needs HOST_TSO4 or HOST_TSO6") {
		t.Errorf("HOST_ECN dropped because %q", why)
	}
	if d.QEMU["host_tso4"] != "off" || d.QEMU["host_ecn"] != "off" || d.QEMU["csum"] != "off" {
		t.Errorf("properties %v", d.QEMU)
	}
	// Insisting on a feature whose prerequisite is disabled is an error.
	if _, err := Decide(r, Request{Disable: virtio.NetGuestCsum, Enable: virtio.NetGuestTSO4}); err == nil || !strings.Contains(err.Error(), "needs GUEST_CSUM") {
		t.Errorf("GUEST_TSO4 without GUEST_CSUM: %v", err)
	}
}

// TestDecideUserspacePath: QEMU with vhost=off still writes to a tap, so
// the tap's offloads bound what it offers; without a tap it offers none.
func TestDecideUserspacePath(t *testing.T) {
	r := load(t, "probe-6.1.json")
	d, err := Decide(r, Request{Backend: BackendUserspace})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	if d.Offer.Has(virtio.NetGuestUSO4) || !strings.Contains(d.Dropped["GUEST_USO4"], "refuses TUN_F_USO4") ||
		!d.Offer.Has(virtio.NetGuestTSO4|virtio.Version1|virtio.EventIdx|virtio.IndirectDesc|virtio.NetMrgRxbuf|virtio.RingReset) {
		t.Errorf("userspace on 6.1: offer %v, dropped %v", d.Offer, d.Dropped)
	}
	noTap := *r
	noTap.VhostNet.Available, noTap.Tap = false, host.Tap{Error: "no /dev/net/tun"}
	d, err = Decide(&noTap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	for _, o := range Offloads {
		if d.Offer.Has(o.F) || d.QEMU[o.Prop] != "off" || !strings.Contains(d.Dropped[bitName(o.F)], "no tap (no /dev/net/tun)") {
			t.Errorf("no tap: %v offered %v, property %q, reason %q", o.F, d.Offer.Has(o.F), d.QEMU[o.Prop], d.Dropped[bitName(o.F)])
		}
	}
	if d.Backend != BackendUserspace || !d.Offer.Has(virtio.Version1|virtio.EventIdx) {
		t.Errorf("no tap: %s offering %v", d.Backend, d.Offer)
	}
	// A tap whose offloads could not be probed takes no receive offload
	// (transmit ones need only the header), and the reason says so.
	unprobed := *r
	unprobed.Tap = host.Tap{Available: true, Error: "offloads not probed: permission denied"}
	d, _ = Decide(&unprobed, Request{})
	if d.Offer.Has(virtio.NetGuestCsum) || !strings.Contains(d.Dropped["GUEST_CSUM"], "the tap's offloads are unknown (offloads not probed: permission denied)") {
		t.Errorf("unprobed tap: offer %v, dropped %v", d.Offer, d.Dropped)
	}
}

// TestDecideQEMUVersion: this machine's probe (QEMU 7.2.22, which has no
// USO properties): USO is dropped because of QEMU and its properties are
// named as missing, not emitted; queue_reset (7.2) is there.
func TestDecideQEMUVersion(t *testing.T) {
	r := load(t, "probe-host-root.json")
	d, err := Decide(r, Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	if d.Backend != BackendUserspace || d.QEMUVersion != "7.2.22" || d.Offer.Has(virtio.NetGuestUSO4) || !d.Offer.Has(virtio.RingReset|virtio.NetGuestTSO4) {
		t.Errorf("%s with QEMU %s offers %v", d.Backend, d.QEMUVersion, d.Offer)
	}
	for _, p := range []string{"guest_uso4", "guest_uso6", "host_uso"} {
		if _, set := d.QEMU[p]; set || !strings.Contains(d.Unavailable[p], "QEMU 7.2.22 has no "+p+" property (it came in QEMU 8.2)") {
			t.Errorf("%s: property %q, unavailable %q", p, d.QEMU[p], d.Unavailable[p])
		}
	}
	if !strings.Contains(d.Dropped["HOST_USO"], "QEMU 7.2.22 has no host_uso") {
		t.Errorf("HOST_USO dropped because %q", d.Dropped["HOST_USO"])
	}
	// A host without a QEMU in its probe takes Request.QEMU.
	d, err = Decide(load(t, "probe-6.12.json"), Request{QEMU: "7.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	if d.Offer.Has(virtio.RingReset) || d.Unavailable["queue_reset"] == "" || d.QEMU["queue_reset"] != "" {
		t.Errorf("QEMU 7.1: offer %v, properties %v, unavailable %v", d.Offer, d.QEMU, d.Unavailable)
	}
	for _, v := range []string{"seven", "9", "+9.1", "8.-1", "8..2", "8.2.", "1.2.3.4", " 8.2", "1234567.0"} {
		if _, err := Decide(r, Request{QEMU: v}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MAJOR.MINOR[.MICRO]") {
			t.Errorf("QEMU version %q: %v, want ErrInvalid naming MAJOR.MINOR[.MICRO]", v, err)
		}
	}
	for _, v := range []string{"8.2", "7.2.22", "10.0.0"} {
		if _, err := Decide(r, Request{QEMU: v}); err != nil {
			t.Errorf("QEMU version %q: %v", v, err)
		}
	}
}

// TestDecideVDPA: with a vdpa device bound to vhost_vdpa, the device's own
// features bound the offer (ring features included).
func TestDecideVDPA(t *testing.T) {
	r := *load(t, "probe-6.12.json")
	dev := virtio.Version1 | virtio.AccessPlatform | virtio.NetMAC | virtio.NetStatus | virtio.NetMTU | virtio.NetMrgRxbuf |
		virtio.EventIdx | virtio.NetCsum | virtio.NetHostTSO4 | virtio.NetHostECN | virtio.NetGuestTSO4 // GUEST_TSO4 without GUEST_CSUM
	r.VDPA.Devices = []host.VDPADevice{{Name: "vdpa0", Driver: "vhost_vdpa", Features: dev.Names(), FeaturesHex: "0x1"}}
	d, err := Decide(&r, Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	want := virtio.Version1 | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.NetCsum | virtio.NetHostTSO4 | virtio.NetHostECN
	if d.Backend != BackendVDPA || d.Offer != want {
		t.Errorf("vdpa: %s offering %v, want %v", d.Backend, d.Offer, want)
	}
	if !strings.Contains(d.Dropped["INDIRECT_DESC"], "vdpa device vdpa0 does not offer it") || d.QEMU["indirect_desc"] != "off" ||
		!strings.Contains(d.Dropped["GUEST_TSO4"], "needs GUEST_CSUM") {
		t.Errorf("vdpa dropped %v, properties %v", d.Dropped, d.QEMU)
	}
	if _, err := Decide(&r, Request{Queues: 2}); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "MQ and CTRL_VQ") {
		t.Errorf("2 queues on a device without MQ: %v", err)
	}
	// A bound device whose features were not read is not chosen.
	r.VDPA.Devices = []host.VDPADevice{{Name: "vdpa0", Driver: "vhost_vdpa", Error: "features: permission denied"}}
	d, _ = Decide(&r, Request{})
	if d.Backend != BackendVhostNet || !strings.Contains(d.Steps[0].Reason, "features could not be read: features: permission denied") {
		t.Errorf("unreadable vdpa device: %+v", d.Steps)
	}
}

func TestDecideProfilesAndRequests(t *testing.T) {
	r := load(t, "probe-6.12.json")
	d, _ := Decide(r, Request{Profile: Compat})
	checkDecision(t, d, Request{})
	if d.Offer.Has(virtio.NetGuestUSO4) || d.Offer.Has(virtio.NetGuestECN) || !d.Offer.Has(virtio.NetGuestTSO4|virtio.EventIdx) {
		t.Errorf("compat offers %v", d.Offer)
	}
	d, _ = Decide(r, Request{Profile: Latency, Queues: 4})
	if d.BusyPollUS == 0 || !d.Offer.Has(virtio.NetMQ|virtio.NetCtrlVQ) || d.QEMU["mq"] != "on" {
		t.Errorf("latency with 4 queues: busy-poll %d, offer %v, properties %v", d.BusyPollUS, d.Offer, d.QEMU)
	}
	unmeasured := *r
	unmeasured.VhostNet.BusyPoll, unmeasured.VhostNet.BusyPollError = nil, "SET_OWNER: operation not permitted"
	if d, _ := Decide(&unmeasured, Request{Profile: Latency}); d.BusyPollUS != 0 || !strings.Contains(strings.Join(d.Notes, " "), "could not measure it (SET_OWNER") {
		t.Errorf("busy-poll not measured: %d, %v", d.BusyPollUS, d.Notes)
	}
	d, _ = Decide(r, Request{Disable: virtio.NetGuestTSO6})
	if d.Offer.Has(virtio.NetGuestTSO6) || d.Dropped["GUEST_TSO6"] != "disabled by request" {
		t.Errorf("disable TSO6: %v %v", d.Offer, d.Dropped)
	}
	d, _ = Decide(r, Request{Backend: BackendUserspace})
	if d.Backend != BackendUserspace || d.Steps[0].Reason != "not requested (--backend userspace)" {
		t.Errorf("userspace: %+v", d.Steps)
	}
	if _, err := Decide(r, Request{Backend: BackendVDPA}); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "not available here") {
		t.Errorf("vdpa requested without a device: %v", err)
	}
	noVhost := *r
	noVhost.VhostNet = host.VhostNet{Error: "no /dev/vhost-net: modprobe vhost_net"}
	d, _ = Decide(&noVhost, Request{})
	if d.Backend != BackendUserspace || !strings.Contains(d.Steps[1].Reason, "modprobe vhost_net") {
		t.Errorf("without vhost-net: %+v", d.Steps)
	}
	for _, bad := range []Request{{Profile: "fast"}, {Backend: "dpdk"}, {Queues: 300}, {Queues: -1},
		{Enable: virtio.NetCsum, Disable: virtio.NetCsum}, {Queues: 2, Disable: virtio.NetCtrlVQ}} {
		if _, err := Decide(r, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := Decide(nil, Request{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil host: %v", err)
	}
}

// TestRequirementsMatchTheOffloadTable: Offload.Needs (read by netctl
// diagnose) says what Requirements says.
func TestRequirementsMatchTheOffloadTable(t *testing.T) {
	for _, o := range Offloads {
		i := slices.IndexFunc(Requirements, func(r Requirement) bool { return r.F == o.F })
		switch {
		case i < 0 && o.Needs != 0:
			t.Errorf("%v needs %v in Offloads, nothing in Requirements", o.F, o.Needs)
		case i >= 0 && Requirements[i].AnyOf != o.Needs:
			t.Errorf("%v needs %v in Offloads, %v in Requirements", o.F, o.Needs, Requirements[i].AnyOf)
		}
	}
	if got := Close(virtio.NetGuestECN|virtio.NetGuestTSO4, nil); got != 0 {
		t.Errorf("Close(GUEST_ECN|GUEST_TSO4) = %v, want nothing (TSO4 needs GUEST_CSUM, then ECN needs TSO)", got)
	}
}

// TestDecideVDPAOnTheVM: the 6.12 VM's probe with a VDUSE device that does
// checksum and TSO on transmit only (policy/probe's VM test made it): the
// offer is what the device has, and every other feature gets its property.
func TestDecideVDPAOnTheVM(t *testing.T) {
	d, err := Decide(load(t, "probe-6.12-vdpa.json"), Request{})
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, d, Request{})
	want := virtio.NetCsum | virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN | virtio.NetMrgRxbuf | virtio.EventIdx | virtio.Version1
	if d.Backend != BackendVDPA || d.Offer != want || !strings.Contains(d.Steps[0].Reason, "probevdpa0 is bound to vhost_vdpa") {
		t.Errorf("%s offering %v, want vdpa offering %v; steps %+v", d.Backend, d.Offer, want, d.Steps)
	}
	for _, p := range []string{"guest_csum", "guest_tso4", "host_ufo", "indirect_desc", "queue_reset", "host_uso"} {
		if d.QEMU[p] != "off" {
			t.Errorf("property %s=%q, want off (properties %v)", p, d.QEMU[p], d.QEMU)
		}
	}
	if !strings.Contains(d.Dropped["GUEST_TSO4"], "vdpa device probevdpa0 does not offer it") || d.ZeroCopy != "" {
		t.Errorf("dropped %v, zero-copy %q", d.Dropped, d.ZeroCopy)
	}
}

// TestUSOReasonsNameTheirOwnFlag: on 6.1 each USO bit names its own tun
// flag (issue 11, defect 5), and HOST_USO names the transmit side.
func TestUSOReasonsNameTheirOwnFlag(t *testing.T) {
	d, err := Decide(load(t, "probe-6.1.json"), Request{Backend: BackendUserspace})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"GUEST_USO4": "tun on 6.1.0-57-amd64 refuses TUN_F_USO4; UDP segmentation offload needs Linux 6.2",
		"GUEST_USO6": "tun on 6.1.0-57-amd64 refuses TUN_F_USO6; UDP segmentation offload needs Linux 6.2",
		"HOST_USO": "tun on 6.1.0-57-amd64 takes no USO frames from the guest (a virtio-net header with gso_type UDP_L4 gives EINVAL), " +
			"and QEMU offers HOST_USO only where tun takes the USO offloads; UDP segmentation offload needs Linux 6.2",
	} {
		if got := d.Dropped[name]; got != want {
			t.Errorf("%s dropped because %q, want %q", name, got, want)
		}
	}
}
