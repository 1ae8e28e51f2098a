package attach

import (
	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/policy"
)

// Host is everything attach does to this host: hostnic's one interface
// of the host side of a NIC (unit tests pass fakes). The real one is
// RealHost.
type Host = hostnic.Host

// RealHost is this host (hostnic.Real). With a CacheDir, Probe keeps the
// tap's offloads for the boot there.
type RealHost = hostnic.Real

// Backend is an open tap or macvtap (hostnic.OpenLink).
type Backend = hostnic.OpenLink

// TapSpec, MacvtapSpec and VDPASpec say what to create or open.
type (
	TapSpec     = hostnic.TapSpec
	MacvtapSpec = hostnic.MacvtapSpec
	VDPASpec    = hostnic.VDPASpec
)

// probeSpec is what attach probes: neither the installed QEMU (attach
// asks the running one, query-version) nor a scratch macvtap (Decide
// counts on the tap's offloads). Together they were 70 of the 93 ms an
// attach took on this host (make bench).
var probeSpec = hostnic.ProbeSpec{}

// probeSpecFor is probeSpec less what p's decision does not use: the
// vdpa family when p names no vdpa device (restrictVDPA refuses vdpa
// then whatever the probe says), and busy-polling's measure (an owner,
// so a vhost worker made and torn down) unless p's profile is latency.
func probeSpecFor(p *parsed) hostnic.ProbeSpec {
	s := probeSpec
	s.NoVDPA = p.VDPA == "" && p.Mgmtdev == ""
	s.VhostNetFeaturesOnly = p.Profile != policy.Latency
	return s
}
