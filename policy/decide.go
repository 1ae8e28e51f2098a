package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/virtio"
)

// The sentinel errors Decide and Plan wrap, shared with the other netctl
// packages (vhostnet.ErrNotSupported is the same value); test with
// errors.Is.
var (
	// ErrInvalid: a request or a set of hosts that cannot be decided on;
	// the message names the valid values.
	ErrInvalid = errs.ErrInvalid
	// ErrNotAvailable: the requested backend is not available on the host
	// (--backend vdpa without a vdpa device bound to vhost_vdpa, ...).
	ErrNotAvailable = errs.ErrNotAvailable
	// ErrNotSupported: features the request insists on (Enable), or its
	// queue pairs, that the chosen backend cannot carry; the message says
	// why for each.
	ErrNotSupported = errs.ErrNotSupported
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

// MaxQueues is the largest queue-pair count Decide accepts.
const MaxQueues = 256

// Request is what the operator asks for.
type Request struct {
	Backend string // "" or "auto" for the chain, or one backend
	Queues  int    // queue pairs, 1 to MaxQueues (0: 1)
	Profile string // default throughput
	// Enable are features the operator insists on (an error if they
	// cannot be honoured); Disable are features never to offer.
	Enable, Disable virtio.Features
	// QEMU is the QEMU version to assume on a host whose probe found no
	// QEMU ("8.2.2"); "" leaves it unknown.
	QEMU string
	// Pool, when set, is the plan of the hosts the VM may migrate among:
	// nothing outside its set is offered (ParsePlanFile reads one).
	Pool *Pool
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
	// Unavailable are properties that would drop a feature but that this
	// host's QEMU does not have: property -> why leaving it out is safe.
	Unavailable map[string]string `json:"qemu_props_unavailable,omitempty"`
	QEMUVersion string            `json:"qemu_version,omitempty"` // the version decided for ("" unknown)
	Notes       []string          `json:"notes,omitempty"`
	BusyPollUS  uint32            `json:"busy_poll_us,omitempty"`
	ZeroCopy    string            `json:"zerocopy,omitempty"`
}

// compatSet is what every kernel netctl supports honours.
const compatSet = virtio.NetCsum | virtio.NetGuestCsum | virtio.NetGuestTSO4 | virtio.NetGuestTSO6 |
	virtio.NetHostTSO4 | virtio.NetHostTSO6

func (req *Request) check() error {
	if req.Profile == "" {
		req.Profile = Throughput
	}
	if req.Profile != Throughput && req.Profile != Latency && req.Profile != Compat {
		return fmt.Errorf("policy: unknown profile %.32q: use throughput, latency or compat: %w", req.Profile, ErrInvalid)
	}
	if req.Queues == 0 {
		req.Queues = 1
	}
	if req.Queues < 1 || req.Queues > MaxQueues {
		return fmt.Errorf("policy: %d queues: use 1 to %d: %w", req.Queues, MaxQueues, ErrInvalid)
	}
	switch req.Backend {
	case "", "auto", BackendVDPA, BackendVhostNet, BackendUserspace:
	default:
		return fmt.Errorf("policy: unknown backend %.32q: use auto, vdpa, vhost-net or userspace: %w", req.Backend, ErrInvalid)
	}
	if both := req.Enable & req.Disable; both != 0 {
		return fmt.Errorf("policy: %v both enabled and disabled: %w", both, ErrInvalid)
	}
	if req.Queues > 1 && req.Disable&(virtio.NetMQ|virtio.NetCtrlVQ) != 0 {
		return fmt.Errorf("policy: %d queue pairs need MQ and CTRL_VQ, which the request disables: use 1 queue pair or keep them: %w", req.Queues, ErrInvalid)
	}
	if req.QEMU != "" {
		if _, ok := parseVersion(req.QEMU); !ok {
			return fmt.Errorf("policy: QEMU version %.32q: want MAJOR.MINOR[.MICRO]: %w", req.QEMU, ErrInvalid)
		}
	}
	return nil
}

// Decide picks the backend and the features for a host and a request. The
// features offered are only those the chosen backend carries (for the
// userspace path, QEMU writes to a tap and needs its offloads; for vDPA,
// the device's own features), and are closed under the virtio spec's
// Requirements. Every offload or ring feature left out gets the QEMU
// property that keeps QEMU from offering it, unless the host's QEMU lacks
// the property (then it is listed in Unavailable).
func Decide(h *host.Description, req Request) (Decision, error) {
	d := Decision{Dropped: map[string]string{}, QEMU: map[string]string{}, Unavailable: map[string]string{}}
	if h == nil {
		return d, fmt.Errorf("policy: no host description: %w", ErrInvalid)
	}
	if err := req.check(); err != nil {
		return d, err
	}
	vdev := d.chain(h, req)
	if d.Backend == "" {
		// The requested backend's own step says why (the steps after it
		// only say "not requested").
		why := d.Steps[len(d.Steps)-1].Reason
		for _, s := range d.Steps {
			if s.Backend == req.Backend {
				why = s.Reason
			}
		}
		return d, fmt.Errorf("policy: backend %s is %w here: %s", req.Backend, ErrNotAvailable, why)
	}
	d.QEMUVersion = firstNonEmpty(h.QEMU.Version, req.QEMU)
	if d.QEMUVersion == "" {
		d.Notes = append(d.Notes, "QEMU version unknown (the probe found no QEMU; netctl plan --qemu VERSION names it): "+
			"properties are given as QEMU 8.2 knows them; before 8.2 leave out guest_uso4, guest_uso6 and host_uso, before 7.2 queue_reset (such a QEMU offers none of them)")
	}

	// What the backend carries, and why each other managed bit is missing.
	avail, why := d.carries(h, req, vdev)

	// What to offer: the request, the profile, then the backend.
	var offer virtio.Features
	for _, m := range managed {
		name := bitName(m.f)
		switch {
		case req.Disable.Has(m.f):
			d.Dropped[name] = "disabled by request"
		case req.Profile == Compat && isOffload(m.f) && !compatSet.Has(m.f):
			d.Dropped[name] = "the compat profile offers only checksum and TSO, which every supported kernel honours"
		case !avail.Has(m.f):
			d.Dropped[name] = why[m.f]
		case req.Pool != nil && !req.Pool.Offer.Has(m.f):
			d.Dropped[name] = req.Pool.reason()
		default:
			offer |= m.f
		}
	}
	if req.Pool != nil {
		if miss := req.Pool.Offer & managedMask &^ avail; miss != 0 {
			var whys []string
			for _, b := range miss.Bits() {
				whys = append(whys, virtio.BitName(b)+" ("+firstNonEmpty(why[virtio.Bit(b)], "not carried by backend "+d.Backend)+")")
			}
			d.Notes = append(d.Notes, fmt.Sprintf("this host cannot carry all of the pool's plan %s: %s: a VM that negotiated it on another host of the pool cannot migrate here; probe this host and plan again (netctl plan)",
				req.Pool.ID, strings.Join(whys, ", ")))
		}
	}
	// The spec's dependencies: TSO needs checksum, ECN needs TSO, ...
	offer = Close(offer, func(f virtio.Features, needs string) {
		d.Dropped[bitName(f)] = "needs " + needs + " (virtio spec 5.1.3.1), which is not offered"
	})
	if req.Queues > 1 {
		mq := virtio.NetMQ | virtio.NetCtrlVQ
		if d.Backend == BackendVDPA && !avail.Has(mq) {
			return d, fmt.Errorf("policy: %d queue pairs: vdpa device %s does not offer MQ and CTRL_VQ: add it with max_vqp %d and a parent that has a control queue, or use 1 queue pair: %w",
				req.Queues, vdev.Name, req.Queues, ErrNotSupported)
		}
		offer |= mq
		d.QEMU["mq"] = "on"
	}
	for _, m := range managed {
		if !offer.Has(m.f) {
			if _, no := d.Unavailable[m.prop]; !no {
				d.QEMU[m.prop] = m.value
			}
		}
	}
	if miss := req.Enable &^ offer; miss != 0 {
		var whys []string
		for _, b := range miss.Bits() {
			n := virtio.BitName(b)
			whys = append(whys, n+": "+firstNonEmpty(d.Dropped[n], "not available with backend "+d.Backend))
		}
		return d, fmt.Errorf("policy: requested features cannot be honoured: %s: %w", strings.Join(whys, "; "), ErrNotSupported)
	}
	d.Offer, d.OfferNames = offer, offer.Names()
	if d.Backend == BackendVhostNet {
		if req.Profile == Latency {
			switch bp := h.VhostNet.BusyPoll; {
			case bp != nil && *bp:
				d.BusyPollUS = 50
			case bp == nil:
				d.Notes = append(d.Notes, "no busy-polling: the probe could not measure it ("+firstNonEmpty(h.VhostNet.BusyPollError, "not reported")+")")
			default:
				d.Notes = append(d.Notes, "no busy-polling: this kernel's vhost-net did not take a busy-poll timeout")
			}
		}
		switch {
		case h.ZeroCopy.Error != "":
			d.ZeroCopy = "unknown: " + h.ZeroCopy.Error
		case h.ZeroCopy.Enabled:
			d.ZeroCopy = "on: frames of 256 bytes and more go out without a copy"
		default:
			d.ZeroCopy = "off: " + h.ZeroCopy.Advice
		}
	}
	return d, nil
}

// chain runs the fallback chain vDPA -> vhost-net -> userspace and
// returns the vdpa device when vDPA is chosen.
func (d *Decision) chain(h *host.Description, req Request) host.VDPADevice {
	want := req.Backend
	if want == "auto" {
		want = ""
	}
	try := func(b string, ok bool, why string) {
		switch {
		case d.Backend != "":
		case want != "" && want != b:
			d.Steps = append(d.Steps, Step{b, false, "not requested (--backend " + want + ")"})
		case !ok:
			d.Steps = append(d.Steps, Step{b, false, why})
		default:
			d.Backend = b
			d.Steps = append(d.Steps, Step{b, true, why})
		}
	}
	var vdev host.VDPADevice
	vdpaOK, vdpaWhy := false, stepReason(BackendVDPA, firstNonEmpty(h.VDPA.Error, "the kernel has no vdpa netlink family: modprobe vdpa (CONFIG_VDPA, Linux 5.12+)"))
	if h.VDPA.Available {
		vdpaWhy = "no vdpa device bound to vhost_vdpa: netctl vdpa mgmtdev show lists the management devices; --mgmtdev MGMTDEV creates one (or netctl vdpa dev add, then bind it to vhost_vdpa)"
		for _, dev := range h.VDPA.Devices {
			if dev.Driver != "vhost_vdpa" {
				continue
			}
			if _, ok := dev.FeatureWord(); !ok {
				vdpaWhy = "vdpa device " + dev.Name + " is bound to vhost_vdpa, but its features could not be read: " +
					stepReason(BackendVDPA, firstNonEmpty(dev.Error, "the probe did not report them"))
				continue
			}
			vdev, vdpaOK, vdpaWhy = dev, true, "vdpa device "+dev.Name+" is bound to vhost_vdpa"
			break
		}
	}
	try(BackendVDPA, vdpaOK, vdpaWhy)
	vhostOK := h.VhostNet.Available && h.Tap.Available
	vhostWhy := "vhost-net with a tap: the data path stays in the kernel"
	if !h.VhostNet.Available {
		vhostWhy = stepReason(BackendVhostNet, firstNonEmpty(h.VhostNet.Error, "no /dev/vhost-net: modprobe vhost_net (CONFIG_VHOST_NET)"))
	} else if !h.Tap.Available {
		vhostWhy = "no tap: " + firstNonEmpty(h.Tap.Error, "the probe found none")
	}
	try(BackendVhostNet, vhostOK, vhostWhy)
	userWhy := "QEMU moves the packets itself (vhost=off) through a tap (slowest, always available)"
	if !h.Tap.Available {
		userWhy = "QEMU moves the packets itself with its own networking (no tap: " + firstNonEmpty(h.Tap.Error, "the probe found none") + ")"
	}
	try(BackendUserspace, true, userWhy)
	return vdev
}

// stepReason makes a probe's error into a step's reason. A step is shown
// after its backend's name ("vdpa: REASON"), and the probe's errors start
// with the same name and the sentinel's text ("vdpa: not available: this
// kernel has no vdpa support loaded: modprobe vdpa ..."): both go, so the
// reason says what is missing and what to do, once.
func stepReason(backend, msg string) string {
	for {
		t := strings.TrimPrefix(msg, backend+": ")
		t = strings.TrimPrefix(t, backend+" not available: ")
		t = strings.TrimPrefix(t, "not available: ")
		if t == msg {
			break
		}
		msg = t
	}
	msg = strings.ReplaceAll(msg, ": "+backend+" not available: ", ": ")
	return strings.ReplaceAll(msg, ": not available: ", ": ")
}

// carries returns the managed bits the chosen backend carries on this
// host and QEMU, and why each other one is missing. It records QEMU
// properties the host's QEMU does not have in d.Unavailable.
func (d *Decision) carries(h *host.Description, req Request, vdev host.VDPADevice) (virtio.Features, map[virtio.Features]string) {
	why := map[virtio.Features]string{}
	var avail virtio.Features
	switch d.Backend {
	case BackendVDPA:
		df, _ := vdev.FeatureWord()
		for _, m := range managed {
			if df.Has(m.f) {
				avail |= m.f
			} else {
				why[m.f] = "vdpa device " + vdev.Name + " does not offer it"
			}
		}
		avail |= df & (virtio.NetMQ | virtio.NetCtrlVQ)
	default:
		// vhost-net, and QEMU's userspace path: both write to a tap,
		// which must take the offloads the guest's receive path needs.
		for _, o := range Offloads {
			switch missing := o.Missing(h.Tap.Offloads); {
			case !h.Tap.Available:
				why[o.F] = "no tap (" + firstNonEmpty(h.Tap.Error, "the probe found none") +
					"): QEMU's own networking carries no virtio-net header, so no checksum or segmentation offload"
			case missing != "" && h.Tap.Error != "":
				why[o.F] = "the tap's offloads are unknown (" + h.Tap.Error + "), so TUN_F_" + strings.ToUpper(missing) + " cannot be counted on"
			case missing != "":
				why[o.F] = o.Refusal("tun", h.Kernel, missing)
			default:
				avail |= o.F
			}
		}
		ring := userspaceRing
		ringWhy := "QEMU's userspace virtio-net does not offer it"
		if d.Backend == BackendVhostNet {
			ring, ringWhy = h.VhostNet.FeatureWord(), "this kernel's vhost-net does not offer it"
		}
		for _, r := range RingFeatures {
			if ring.Has(r.F) {
				avail |= r.F
			} else {
				why[r.F] = ringWhy
			}
		}
	}
	// QEMU itself: a property (and the feature) newer than the host's QEMU.
	for _, m := range managed {
		if m.qemu == "" {
			continue
		}
		if ok, known := versionAtLeast(d.QEMUVersion, m.qemu); known && !ok {
			r := fmt.Sprintf("QEMU %s has no %s property (it came in QEMU %s)", d.QEMUVersion, m.prop, m.qemu)
			if avail.Has(m.f) || why[m.f] == "" {
				why[m.f] = r
			} else {
				why[m.f] += ", and " + r
			}
			avail &^= m.f
			d.Unavailable[m.prop] = r + ", and so does not offer " + bitName(m.f) + ": nothing to turn off"
		}
	}
	return avail, why
}

func isOffload(f virtio.Features) bool {
	return slices.ContainsFunc(Offloads, func(o Offload) bool { return o.F == f })
}

func bitName(f virtio.Features) string { return virtio.BitName(f.Bits()[0]) }

func firstMissing(need, have []string) string {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return n
		}
	}
	return ""
}

func linuxNeeded(offload string) string {
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
