package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/virtio"
)

// Backends, in the order the fallback chain tries them.
const (
	BackendVDPA      = "vdpa"
	BackendVhostNet  = "vhost-net"
	BackendUserspace = "userspace"
)

// Profiles.
const (
	Throughput = "throughput" // every offload the backend honours
	Latency    = "latency"    // offloads, plus vhost busy-polling
	Compat     = "compat"     // checksum and TSO only: the set every supported kernel has
)

// Request is what the operator asks for.
type Request struct {
	Backend string // "" or "auto" for the chain, or one backend
	Queues  int
	Profile string          // default throughput
	Enable  virtio.Features // features the operator insists on (an error if they cannot be honoured)
	Disable virtio.Features // features never to offer
}

// Step is one backend the chain considered.
type Step struct {
	Backend string `json:"backend"`
	Chosen  bool   `json:"chosen"`
	Reason  string `json:"reason"`
}

// Decision is the outcome, with reasons.
type Decision struct {
	Backend    string            `json:"backend"`
	Steps      []Step            `json:"steps"`
	Offer      virtio.Features   `json:"-"`
	OfferNames []string          `json:"offer"`
	Dropped    map[string]string `json:"dropped"`    // feature -> why it is not offered
	QEMU       map[string]string `json:"qemu_props"` // virtio-net-pci properties to set
	BusyPollUS uint32            `json:"busy_poll_us,omitempty"`
	ZeroCopy   string            `json:"zerocopy,omitempty"`
}

// compatSet is what every kernel netctl supports honours.
const compatSet = virtio.NetCsum | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 |
	virtio.NetHostTSO4 | virtio.NetHostTSO6

// Decide picks the backend and the features for a host and a request.
func Decide(p *probe.Result, req Request) (Decision, error) {
	d := Decision{Dropped: map[string]string{}, QEMU: map[string]string{}}
	if req.Profile == "" {
		req.Profile = Throughput
	}
	if req.Profile != Throughput && req.Profile != Latency && req.Profile != Compat {
		return d, fmt.Errorf("policy: unknown profile %q: use throughput, latency or compat", req.Profile)
	}
	if req.Queues == 0 {
		req.Queues = 1
	}
	if req.Queues < 1 || req.Queues > 256 {
		return d, fmt.Errorf("policy: %d queues: use 1 to 256", req.Queues)
	}
	want := req.Backend
	if want == "" || want == "auto" {
		want = ""
	} else if want != BackendVDPA && want != BackendVhostNet && want != BackendUserspace {
		return d, fmt.Errorf("policy: unknown backend %q: use auto, vdpa, vhost-net or userspace", req.Backend)
	}
	// The chain.
	try := func(b string, ok bool, why string) bool {
		if d.Backend != "" {
			return false
		}
		if want != "" && want != b {
			d.Steps = append(d.Steps, Step{b, false, "not requested (--backend " + want + ")"})
			return false
		}
		if !ok {
			d.Steps = append(d.Steps, Step{b, false, why})
			return false
		}
		d.Backend = b
		d.Steps = append(d.Steps, Step{b, true, why})
		return true
	}
	vdpaOK, vdpaWhy := false, "no vdpa: "+firstNonEmpty(p.VDPA.Error, "the vdpa family is missing")
	if p.VDPA.Available {
		vdpaWhy = "no vdpa device bound to vhost_vdpa (netctl vdpa dev add, then bind it)"
		for _, dev := range p.VDPA.Devices {
			if dev.Driver == "vhost_vdpa" {
				vdpaOK, vdpaWhy = true, "vdpa device "+dev.Name+" is bound to vhost_vdpa"
				break
			}
		}
	}
	try(BackendVDPA, vdpaOK, vdpaWhy)
	vhostOK := p.VhostNet.Available && p.Tap.Available
	vhostWhy := "vhost-net with a tap: the data path stays in the kernel"
	if !p.VhostNet.Available {
		vhostWhy = firstNonEmpty(p.VhostNet.Error, "no /dev/vhost-net")
	} else if !p.Tap.Available {
		vhostWhy = "no tap: " + p.Tap.Error
	}
	try(BackendVhostNet, vhostOK, vhostWhy)
	try(BackendUserspace, true, "the VMM moves packets itself (slowest, always available)")
	if d.Backend == "" {
		return d, fmt.Errorf("policy: backend %s is not available here: %s", want, d.Steps[len(d.Steps)-1].Reason)
	}

	// Features.
	has := func(names []string) (bool, string) {
		for _, n := range names {
			if !slices.Contains(p.Tap.Offloads, n) {
				return false, n
			}
		}
		return true, ""
	}
	var offer virtio.Features
	consider := func(o Offload) {
		name := virtio.BitName(o.F.Bits()[0])
		switch {
		case req.Disable.Has(o.F):
			d.Dropped[name] = "disabled by request"
		case req.Profile == Compat && !compatSet.Has(o.F):
			d.Dropped[name] = "the compat profile offers only checksum and TSO, which every supported kernel honours"
		case d.Backend == BackendVhostNet:
			if ok, missing := has(o.Tap); !ok {
				d.Dropped[name] = fmt.Sprintf("tun on %s refuses TUN_F_%s%s", p.Kernel, strings.ToUpper(missing), needs(missing))
			} else {
				offer |= o.F
			}
		default:
			offer |= o.F // vDPA devices and the userspace path decide for themselves
		}
		if _, dropped := d.Dropped[name]; dropped {
			d.QEMU[o.Prop] = "off"
		}
	}
	for _, o := range Offloads {
		consider(o)
	}
	// Ring and transport features vhost-net offers.
	if d.Backend == BackendVhostNet {
		var vf virtio.Features
		for _, n := range p.VhostNet.Features {
			if f, ok := virtio.ParseFeature(n); ok {
				vf |= f
			}
		}
		for _, f := range []virtio.Features{virtio.Version1, virtio.NetMrgRxbuf, virtio.EventIdx, virtio.IndirectDesc} {
			if vf.Has(f) && !req.Disable.Has(f) {
				offer |= f
			} else if !vf.Has(f) {
				d.Dropped[virtio.BitName(f.Bits()[0])] = "this kernel's vhost-net does not offer it"
			}
		}
		if req.Queues > 1 {
			offer |= virtio.NetMQ | virtio.NetCtrlVQ
		}
	}
	if miss := req.Enable &^ offer; miss != 0 {
		var why []string
		for _, b := range miss.Bits() {
			n := virtio.BitName(b)
			why = append(why, n+": "+firstNonEmpty(d.Dropped[n], "not available with backend "+d.Backend))
		}
		return d, fmt.Errorf("policy: requested features cannot be honoured: %s", strings.Join(why, "; "))
	}
	d.Offer, d.OfferNames = offer, offer.Names()
	if req.Profile == Latency && d.Backend == BackendVhostNet {
		d.BusyPollUS = 50
	}
	if d.Backend == BackendVhostNet {
		if p.ZeroCopy.Enabled {
			d.ZeroCopy = "on: frames of 256 bytes and more go out without a copy"
		} else {
			d.ZeroCopy = "off: " + p.ZeroCopy.Advice
		}
	}
	return d, nil
}

func needs(offload string) string {
	switch offload {
	case "uso4", "uso6":
		return "; UDP segmentation offload needs Linux 6.2"
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// Difference is one feature some hosts offer and others do not.
type Difference struct {
	Feature string            `json:"feature"`
	Missing map[string]string `json:"missing_on"` // host -> reason
}

// PlanResult is the feature set safe to offer on every host.
type PlanResult struct {
	Offer       []string          `json:"offer"`
	Differences []Difference      `json:"differences"`
	QEMU        map[string]string `json:"qemu_props"`
}

// Plan decides for each host (by name) with the same request and returns
// the features all of them honour: what a VM that may live-migrate among
// them can be offered.
func Plan(hosts map[string]*probe.Result, req Request) (PlanResult, error) {
	res := PlanResult{QEMU: map[string]string{}}
	names := make([]string, 0, len(hosts))
	for n := range hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	all := virtio.Features(^uint64(0))
	decisions := map[string]Decision{}
	var union virtio.Features
	for _, n := range names {
		d, err := Decide(hosts[n], req)
		if err != nil {
			return res, fmt.Errorf("host %s: %w", n, err)
		}
		decisions[n] = d
		all &= d.Offer
		union |= d.Offer
		for k, v := range d.QEMU {
			res.QEMU[k] = v
		}
	}
	res.Offer = all.Names()
	for _, b := range (union &^ all).Bits() {
		name := virtio.BitName(b)
		diff := Difference{Feature: name, Missing: map[string]string{}}
		for _, n := range names {
			if !decisions[n].Offer.Has(virtio.Bit(b)) {
				diff.Missing[n] = firstNonEmpty(decisions[n].Dropped[name], "not offered")
			}
		}
		res.Differences = append(res.Differences, diff)
		for _, o := range Offloads {
			if o.F == virtio.Bit(b) {
				res.QEMU[o.Prop] = "off"
			}
		}
	}
	return res, nil
}
