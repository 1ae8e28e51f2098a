package policy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/virtio"
)

// load reads a probe result saved from the test VMs (netctl probe -j).
func load(t testing.TB, name string) *probe.Result {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var r probe.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestDecideOnTheVMKernels(t *testing.T) {
	new, old := load(t, "probe-6.12.json"), load(t, "probe-6.1.json")
	d, err := Decide(new, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Backend != BackendVhostNet || !d.Offer.Has(virtio.NetGuestUSO4|virtio.NetGuestUSO6|virtio.NetHostUSO|virtio.NetGuestTSO4|virtio.Version1|virtio.NetMrgRxbuf) {
		t.Errorf("6.12: %s offering %v", d.Backend, d.Offer)
	}
	// vDPA was skipped with its reason: the family is there but nothing is bound.
	if d.Steps[0].Backend != BackendVDPA || d.Steps[0].Chosen || !strings.Contains(d.Steps[0].Reason, "no vdpa device bound") {
		t.Errorf("6.12 steps %+v", d.Steps)
	}
	d, err = Decide(old, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Offer.Has(virtio.NetGuestUSO4) || d.Offer.Has(virtio.NetHostUSO) || !d.Offer.Has(virtio.NetGuestTSO4) {
		t.Errorf("6.1 offers %v", d.Offer)
	}
	if why := d.Dropped["GUEST_USO4"]; !strings.Contains(why, "Linux 6.2") || !strings.Contains(why, "6.1.0") {
		t.Errorf("6.1: USO dropped because %q", why)
	}
	if d.QEMU["guest_uso4"] != "off" || d.QEMU["host_uso"] != "off" {
		t.Errorf("6.1 QEMU properties %v", d.QEMU)
	}
	if !strings.Contains(d.Steps[0].Reason, "no vdpa support") {
		t.Errorf("6.1 vdpa step %+v", d.Steps[0])
	}
	// Asking for USO on 6.1 is an error that says why.
	if _, err := Decide(old, Request{Enable: virtio.NetGuestUSO4}); err == nil || !strings.Contains(err.Error(), "Linux 6.2") {
		t.Errorf("USO enabled on 6.1: %v", err)
	}
}

func TestDecideProfilesAndRequests(t *testing.T) {
	r := load(t, "probe-6.12.json")
	d, _ := Decide(r, Request{Profile: Compat})
	if d.Offer.Has(virtio.NetGuestUSO4) || d.Offer.Has(virtio.NetGuestECN) || !d.Offer.Has(virtio.NetGuestTSO4) {
		t.Errorf("compat offers %v", d.Offer)
	}
	d, _ = Decide(r, Request{Profile: Latency, Queues: 4})
	if d.BusyPollUS == 0 || !d.Offer.Has(virtio.NetMQ) {
		t.Errorf("latency with 4 queues: busy-poll %d, offer %v", d.BusyPollUS, d.Offer)
	}
	d, _ = Decide(r, Request{Disable: virtio.NetGuestTSO6})
	if d.Offer.Has(virtio.NetGuestTSO6) || d.Dropped["GUEST_TSO6"] != "disabled by request" {
		t.Errorf("disable TSO6: %v %v", d.Offer, d.Dropped)
	}
	d, _ = Decide(r, Request{Backend: BackendUserspace})
	if d.Backend != BackendUserspace || d.Steps[0].Reason != "not requested (--backend userspace)" {
		t.Errorf("userspace: %+v", d.Steps)
	}
	if _, err := Decide(r, Request{Backend: BackendVDPA}); err == nil || !strings.Contains(err.Error(), "not available here") {
		t.Errorf("vdpa requested without a device: %v", err)
	}
	noVhost := *r
	noVhost.VhostNet = probe.VhostNet{Error: "no /dev/vhost-net: modprobe vhost_net"}
	d, _ = Decide(&noVhost, Request{})
	if d.Backend != BackendUserspace || !strings.Contains(d.Steps[1].Reason, "modprobe vhost_net") {
		t.Errorf("without vhost-net: %+v", d.Steps)
	}
	withVDPA := *r
	withVDPA.VDPA.Devices = []probe.VDPADevice{{Name: "vdpa0", Driver: "vhost_vdpa"}}
	if d, _ := Decide(&withVDPA, Request{}); d.Backend != BackendVDPA {
		t.Errorf("with a bound vdpa device: %s", d.Backend)
	}
	for _, bad := range []Request{{Profile: "fast"}, {Backend: "dpdk"}, {Queues: 300}} {
		if _, err := Decide(r, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestPlanDropsUSOAcrossKernels(t *testing.T) {
	p, err := Plan(map[string]*probe.Result{"new": load(t, "probe-6.12.json"), "old": load(t, "probe-6.1.json")}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.Offer, "GUEST_USO4") || !slices.Contains(p.Offer, "GUEST_TSO4") {
		t.Errorf("plan offers %v", p.Offer)
	}
	found := false
	for _, d := range p.Differences {
		if d.Feature == "GUEST_USO4" {
			found = true
			if _, ok := d.Missing["new"]; ok || !strings.Contains(d.Missing["old"], "Linux 6.2") {
				t.Errorf("USO difference %+v", d)
			}
		}
	}
	if !found || p.QEMU["guest_uso4"] != "off" {
		t.Errorf("differences %+v, qemu %v", p.Differences, p.QEMU)
	}
}

// FuzzDecide: any probe and request give no panic, and never a guest
// receive offload the tap cannot take.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0x7f), true, true, uint64(0), uint64(0), uint8(0))
	f.Fuzz(func(t *testing.T, tapBits uint8, vhost, tap bool, enable, disable uint64, profile uint8) {
		names := []string{"csum", "tso4", "tso6", "tso_ecn", "ufo", "uso4", "uso6"}
		r := load(t, "probe-6.12.json")
		r.VhostNet.Available, r.Tap.Available = vhost, tap
		r.Tap.Offloads = nil
		for i, n := range names {
			if tapBits&(1<<i) != 0 {
				r.Tap.Offloads = append(r.Tap.Offloads, n)
			}
		}
		req := Request{Enable: virtio.Features(enable), Disable: virtio.Features(disable),
			Profile: []string{Throughput, Latency, Compat}[int(profile)%3]}
		d, err := Decide(r, req)
		if err != nil || d.Backend != BackendVhostNet {
			return
		}
		for _, o := range Offloads {
			if !d.Offer.Has(o.F) {
				continue
			}
			for _, need := range o.Tap {
				if !slices.Contains(r.Tap.Offloads, need) {
					t.Fatalf("offered %v without tap offload %s (tap has %v)", o.F, need, r.Tap.Offloads)
				}
			}
		}
		if d.Offer&virtio.Features(disable)&^(virtio.NetMQ|virtio.NetCtrlVQ) != 0 {
			t.Fatalf("offered disabled features %v", d.Offer&virtio.Features(disable))
		}
	})
}
