package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

var tapNames = []string{"csum", "tso4", "tso6", "tso_ecn", "ufo", "uso4", "uso6"}

// FuzzDecide: for any host and request, the decision offers a set closed
// under the spec's requirements, only what the chosen backend carries
// (the tap's offloads for vhost-net and the userspace path, the device's
// features for vDPA), nothing disabled, everything enabled (or fails), and
// a property or a reason for every feature left out.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0x7f), true, true, uint64(0x1033d008000), uint64(0), uint64(0), uint64(0), uint8(0), uint8(0), uint8(1), uint8(0))
	f.Add(uint8(0x1e), true, true, uint64(0x33d008000), uint64(0), uint64(0), uint64(1), uint8(1), uint8(0), uint8(4), uint8(1))
	f.Add(uint8(0x7f), false, false, uint64(0), uint64(0x32001b829), uint64(0), uint64(0), uint8(2), uint8(1), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, tapBits uint8, vhost, tap bool, vhostFeat, vdpaFeat, enable, disable uint64, profile, backend, queues, qemu uint8) {
		h := load(t, "probe-6.12.json")
		h.VhostNet.Available, h.Tap.Available = vhost, tap
		h.VhostNet.Features = virtio.Features(vhostFeat).Names()
		h.Tap.Offloads = nil
		for i, n := range tapNames {
			if tapBits&(1<<i) != 0 {
				h.Tap.Offloads = append(h.Tap.Offloads, n)
			}
		}
		if vdpaFeat != 0 {
			h.VDPA.Devices = []host.VDPADevice{{Name: "vdpa0", Driver: "vhost_vdpa", Features: virtio.Features(vdpaFeat).Names(), FeaturesHex: "0x1"}}
		}
		h.QEMU.Version = []string{"", "7.1.0", "7.2.22", "8.2.2"}[qemu%4]
		req := Request{Enable: virtio.Features(enable), Disable: virtio.Features(disable), Queues: int(queues % 5),
			Profile: []string{Throughput, Latency, Compat}[profile%3], Backend: []string{"", BackendVDPA, BackendVhostNet, BackendUserspace}[backend%4]}
		d, err := Decide(h, req)
		if err != nil {
			return
		}
		checkDecision(t, d, req)
		switch d.Backend {
		case BackendVDPA:
			if dev := virtio.Features(vdpaFeat); !dev.Has(d.Offer) {
				t.Fatalf("vdpa offers %v, the device has %v", d.Offer, dev)
			}
		case BackendVhostNet, BackendUserspace:
			for _, o := range Offloads {
				if !d.Offer.Has(o.F) {
					continue
				}
				for _, need := range o.Tap {
					if !tap || !slices.Contains(h.Tap.Offloads, need) {
						t.Fatalf("%s offered %v without tap offload %s (tap %v: %v)", d.Backend, o.F, need, tap, h.Tap.Offloads)
					}
				}
			}
			if ring := virtio.Features(vhostFeat); d.Backend == BackendVhostNet && !ring.Has(d.Offer&userspaceRing) {
				t.Fatalf("vhost-net offers ring features %v it does not have (%v)", d.Offer&userspaceRing, ring)
			}
		}
		if ok, known := versionAtLeast(h.QEMU.Version, "8.2"); known && !ok && d.Offer&(virtio.NetGuestUSO4|virtio.NetGuestUSO6|virtio.NetHostUSO) != 0 {
			t.Fatalf("QEMU %s offered USO: %v", h.QEMU.Version, d.Offer)
		}
	})
}

// FuzzPlanProbeJSON: the probe documents netctl plan reads are untrusted.
// Any two give a plan or an error, never a panic, with allocation
// proportional to the input; a plan's offer is closed and what every host
// offers.
func FuzzPlanProbeJSON(f *testing.F) {
	files, _ := filepath.Glob("testdata/probe-*.json")
	if len(files) < 4 {
		f.Fatalf("seed corpus: %v", files)
	}
	for _, a := range files {
		for _, b := range files {
			ba, _ := os.ReadFile(a)
			bb, _ := os.ReadFile(b)
			f.Add(ba, bb)
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var hosts []*host.Description
		for _, doc := range [][]byte{a, b} {
			if h, err := host.Parse(doc); err == nil {
				hosts = append(hosts, h)
			}
		}
		var p PlanResult
		var err error
		fuzzalloc.Check(t, len(a)+len(b), func() { p, err = Plan(hosts, Request{}) })
		if len(hosts) == 0 || (len(hosts) == 2 && hosts[0].Hostname == hosts[1].Hostname) {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%d hosts: %v", len(hosts), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var offer virtio.Features
		for _, n := range p.Offer {
			f, ok := virtio.ParseFeature(n)
			if !ok {
				t.Fatalf("offer name %q", n)
			}
			offer |= f
		}
		if Unmet(offer) != 0 {
			t.Fatalf("plan offer %v not closed", offer)
		}
		for _, h := range hosts {
			d, err := Decide(h, Request{})
			if err != nil || !d.Offer.Has(offer) {
				t.Fatalf("host %s offers %v (%v), the plan %v", h.Hostname, d.Offer, err, offer)
			}
		}
	})
}
