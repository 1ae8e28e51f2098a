package probe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/zerocopy"
)

// fake sources: every section works, except what a test breaks.
func fake() sources {
	yes := true
	return sources{
		uname: func() (string, string) { return "h1", "6.12.117+deb13-amd64" },
		vhostNet: func(v *host.VhostNet) {
			v.Available, v.Features, v.FeaturesHex, v.BusyPoll = true, []string{"VERSION_1"}, "0x100000000", &yes
		},
		scratch: func(r *Result, tap, _ bool) {
			if tap {
				r.Tap.Available, r.Tap.Offloads = true, []string{"csum"}
			}
		},
		vdpa:       func(v *host.VDPA) { v.Error = "no vdpa" },
		vdpaLoaded: func() error { return nil },
		zeroCopy: func() (zerocopy.Status, error) {
			return zerocopy.Status{Loaded: true, Threshold: 256}, nil
		},
		qemu: func(q *host.QEMU) { q.Version = "8.2.2" },
		devFeatures: func(name string) (map[string]bool, error) {
			if strings.HasPrefix(name, "bad") {
				return nil, fmt.Errorf("ethtool: no device %q", name)
			}
			return map[string]bool{"rx-gro": true, name: true}, nil
		},
	}
}

// TestProbeDevsInOrder: --dev devices come back in the order given (once
// each); an unknown one carries its error and the rest of the probe stays.
func TestProbeDevsInOrder(t *testing.T) {
	devs := []string{"eth9", "bad0", "eth1", "lo", "eth9", "eth0"}
	for range 20 { // map iteration would show any randomness
		r, err := probe(devs, fake(), All)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range r.Devices {
			got = append(got, d.Name)
			if (d.Error != "") != (d.Name == "bad0") || (d.Error == "") != d.Features[d.Name] {
				t.Fatalf("device %+v", d)
			}
		}
		if !slices.Equal(got, []string{"eth9", "bad0", "eth1", "lo", "eth0"}) {
			t.Fatalf("devices %v", got)
		}
		if !r.Tap.Available || !r.VhostNet.Available || r.QEMU.Version != "8.2.2" || r.Schema != host.Schema || r.Hostname != "h1" {
			t.Fatalf("an unknown --dev lost the rest: %+v", r)
		}
	}
}

// TestProbeSectionErrors: a section that fails says why and the others
// are kept; the result is still a valid host description.
func TestProbeSectionErrors(t *testing.T) {
	src := fake()
	src.zeroCopy = func() (zerocopy.Status, error) {
		return zerocopy.Status{Threshold: 256}, errors.New("zerocopy: permission denied")
	}
	src.scratch = func(r *Result, _, _ bool) {
		r.Tap.Error, r.Macvtap.Error = "not probed: needs root", "not probed: needs root"
	}
	src.vhostNet = func(v *host.VhostNet) { v.Available, v.BusyPollError = true, "busy-poll not measured: EPERM" }
	r, err := probe(nil, src, All)
	if err != nil {
		t.Fatal(err)
	}
	if r.ZeroCopy.Error != "zerocopy: permission denied" || r.Tap.Error == "" || r.Tap.Available || r.Macvtap.Error == "" ||
		r.VhostNet.BusyPoll != nil || r.VDPA.Error != "no vdpa" || r.QEMU.Version != "8.2.2" {
		t.Errorf("%+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
}

func TestProbeRefusesBadDevs(t *testing.T) {
	for _, devs := range [][]string{{""}, {"a-name-of-16-chr"}, slices.Repeat([]string{"lo"}, MaxDevs+1)} {
		if _, err := probe(devs, fake(), All); !errors.Is(err, ErrInvalid) {
			t.Errorf("%d devs %.20q: %v", len(devs), devs, err)
		}
	}
}

func TestParseQEMUVersion(t *testing.T) {
	for out, want := range map[string]string{
		// this machine's QEMU, and upstream builds
		"QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)\nCopyright (c) 2003-2022 Fabrice Bellard and the QEMU Project developers\n": "7.2.22",
		"QEMU emulator version 8.2.2\n":            "8.2.2",
		"QEMU emulator version 10.1.0 (v10.1.0)\n": "10.1.0",
		"qemu-img version 7.2.22\n":                "",
		"QEMU emulator version 7\n":                "",
		"QEMU emulator version 7.x.1\n":            "",
		"":                                         "",
	} {
		got, err := ParseQEMUVersion(out)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("%q: %q, %v; want %q", out, got, err, want)
		}
	}
}

// TestProbeForSkipsParts: without Macvtap and QEMU, no scratch macvtap is
// made and QEMU is not run; both sections say they were not needed, the
// tap, vhost-net and vDPA sections are read as always, and the result is
// a valid description.
func TestProbeForSkipsParts(t *testing.T) {
	src := fake()
	var macvtapAsked, qemuRan bool
	var tapAsked bool
	src.scratch = func(r *Result, tap, m bool) {
		if tap {
			r.Tap.Available, r.Tap.Offloads = true, []string{"csum"}
		}
		tapAsked, macvtapAsked = tap, m
	}
	inner := src.qemu
	src.qemu = func(q *host.QEMU) { qemuRan = true; inner(q) }
	r, err := probe(nil, src, Parts{})
	if err != nil {
		t.Fatal(err)
	}
	if macvtapAsked || qemuRan {
		t.Errorf("the scratch macvtap was asked for (%v) or QEMU ran (%v)", macvtapAsked, qemuRan)
	}
	if r.Macvtap.Error != notNeeded || r.QEMU.Error != notNeeded || r.QEMU.Version != "" || !r.Tap.Available || !r.VhostNet.Available {
		t.Errorf("%+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	if _, err := probe(nil, src, All); err != nil || !macvtapAsked || !qemuRan || !tapAsked {
		t.Errorf("All: tap %v, macvtap %v, QEMU %v, %v", tapAsked, macvtapAsked, qemuRan, err)
	}
	// A known tap section is used as it is, without a scratch tap.
	known := &host.Tap{Available: true, Offloads: []string{"csum", "tso4", "uso4"}}
	r, err = probe(nil, src, Parts{Tap: known})
	if err != nil || tapAsked || !r.Tap.Available || strings.Join(r.Tap.Offloads, " ") != "csum tso4 uso4" {
		t.Errorf("known tap: asked %v, %+v, %v", tapAsked, r.Tap, err)
	}
	if r.Tap.Offloads[0] = "x"; known.Offloads[0] != "csum" {
		t.Errorf("the result shares the caller's offload slice")
	}
}

// TestProbeLeavesOutWhatIsNotAsked: with NoVDPA the vdpa family is not
// read and says why; with VhostNetFeaturesOnly only vhost-net's
// availability and features are (no owner, no busy-poll measure).
func TestProbeLeavesOutWhatIsNotAsked(t *testing.T) {
	src := fake()
	src.vdpa = func(*host.VDPA) { t.Error("the vdpa family was read") }
	src.vhostNet = func(*host.VhostNet) { t.Error("vhost-net was probed whole") }
	src.vhostNetFeatures = func(v *host.VhostNet) { v.Available, v.Features = true, []string{"VERSION_1"} }
	r, err := probe(nil, src, Parts{NoVDPA: true, VhostNetFeaturesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.VDPA.Available || r.VDPA.Error != VDPANotAsked || !r.VhostNet.Available || r.VhostNet.BusyPoll != nil {
		t.Fatalf("vdpa %+v, vhost-net %+v", r.VDPA, r.VhostNet)
	}
	// A kernel without vdpa says so, not that it was not asked.
	src.vdpaLoaded = func() error { return errors.New("vdpa: not available: this kernel has no vdpa support loaded") }
	if r, err := probe(nil, src, Parts{NoVDPA: true, VhostNetFeaturesOnly: true}); err != nil || r.VDPA.Error != "vdpa: not available: this kernel has no vdpa support loaded" {
		t.Fatalf("no vdpa in the kernel: %+v, %v", r.VDPA, err)
	}
	// The default reads both whole.
	src = fake()
	src.vhostNetFeatures = func(*host.VhostNet) { t.Error("All read vhost-net's features only") }
	if r, err := probe(nil, src, All); err != nil || r.VhostNet.BusyPoll == nil || r.VDPA.Error != "no vdpa" {
		t.Fatalf("All: %+v, %v", r, err)
	}
}
