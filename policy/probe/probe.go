// Package probe finds out what this host's kernel offers netctl:
// vhost-net, tun and its offloads, macvtap, vDPA, zero-copy TX and the
// installed QEMU (netctl probe). Scratch devices are made in a throwaway
// network namespace, so probing changes nothing on the host.
//
// The result is a host.Description. Each section is read on its own: one
// that cannot be read (no root, no module, an unknown --dev) carries its
// reason in its Error field and the others are still reported.
package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/zerocopy"
)

// Result is the host description Probe fills in.
type Result = host.Description

// ErrInvalid is returned (wrapped) for a bad list of devices.
var ErrInvalid = errs.ErrInvalid

// MaxDevs bounds the devices one probe reads.
const MaxDevs = 64

// sources are where the sections come from: the host's kernel in Probe,
// stand-ins in unit tests.
type sources struct {
	uname    func() (hostname, release string)
	vhostNet func(*host.VhostNet)
	// vhostNetFeatures is vhostNet's availability and features alone.
	vhostNetFeatures func(*host.VhostNet)
	scratch          func(r *Result, tap, macvtap bool) // the scratch devices asked for
	vdpa             func(*host.VDPA)
	// vdpaLoaded is whether the kernel has vdpa at all (no netlink).
	vdpaLoaded  func() error
	zeroCopy    func() (zerocopy.Status, error)
	qemu        func(*host.QEMU)
	devFeatures func(name string) (map[string]bool, error)
	// vdpaFacts reads what QEMU's shadow virtqueues need from a device's
	// vhost-vdpa node; nil and why ("unknown: ...") when it was not read.
	vdpaFacts func(host.VDPADevice) (*host.VDPAFacts, string)
}

var kernel = sources{
	uname: func() (string, string) {
		var uts unix.Utsname
		if err := unix.Uname(&uts); err != nil {
			return "", ""
		}
		return unix.ByteSliceToString(uts.Nodename[:]), unix.ByteSliceToString(uts.Release[:])
	},
	vhostNet:         probeVhostNet,
	vhostNetFeatures: probeVhostNetFeatures,
	scratch:          probeScratch,
	vdpa:             probeVDPA,
	vdpaLoaded:       vdpa.Loaded,
	zeroCopy:         zerocopy.Read,
	qemu:             probeQEMU,
	devFeatures: func(name string) (map[string]bool, error) {
		f, err := macvtap.ReadFeatures(name)
		if err != nil {
			return nil, err
		}
		return f.Active, nil
	},
	vdpaFacts: probeVDPAFacts,
}

// Probe looks at everything; devs names network devices whose ethtool
// features to read (lower devices of macvtaps or packet sockets), reported
// in the order given. It fails only for a bad devs list (an empty name,
// more than MaxDevs); what it cannot read is reported in the result.
// Without root the scratch devices cannot be made, and tap and macvtap say
// so.
func Probe(devs []string) (*Result, error) {
	return probe(devs, kernel, All)
}

// Parts selects the sections of the probe that cost the most and that a
// caller may not need. The rest (vhost-net, the tap's offloads, vDPA,
// zero-copy) is always read: it is what policy.Decide chooses by.
type Parts struct {
	// Macvtap: make a scratch macvtap to find its offloads by trial
	// (about 35 ms on the development machine, more under TCG).
	Macvtap bool
	// QEMU: run the installed qemu-system-x86_64 for its version and
	// properties (about 35 ms). A caller that is talking to the running
	// QEMU over QMP asks it instead.
	QEMU bool
	// Tap, when set, is the tap section already known (netctl attach
	// keeps the one it probed for as long as the host has not rebooted:
	// it depends only on the running kernel); nil probes it by trial on a
	// scratch tap (15-45 ms on the development machine).
	Tap *host.Tap
	// VDPAMigration: say for each vdpa device whether the installed QEMU
	// can live-migrate it, from its vhost-vdpa node (opened when no
	// process holds it; see probeVDPAFacts). Needs QEMU. Only netctl
	// probe asks for it (Full).
	VDPAMigration bool
	// NoVDPA leaves the vdpa family out (its Error is VDPANotAsked): a
	// caller with no vdpa device or management device to use decides
	// nothing by it (a netlink dial and two dumps an attach).
	NoVDPA bool
	// VhostNetFeaturesOnly reads of vhost-net only whether
	// /dev/vhost-net opens and its features, which is all a decision
	// uses but busy-polling's (the latency profile): no owner, so no
	// worker thread made and torn down, no fork-from-owner or
	// max_mem_regions (diagnose and plan report those).
	VhostNetFeaturesOnly bool
}

// VDPANotAsked is the vdpa section's Error when Parts.NoVDPA left it out
// and the kernel has vdpa (without vdpa the Error says that).
const VDPANotAsked = "not probed: no vdpa device or management device was given"

// All is what Probe reads: every part but VDPAMigration, which opens
// devices (netctl diagnose probes with it while a VM runs).
var All = Parts{Macvtap: true, QEMU: true}

// Full is All and VDPAMigration: what netctl probe reads (ProbeFull).
var Full = Parts{Macvtap: true, QEMU: true, VDPAMigration: true}

// ProbeFull is Probe that also says, for each vdpa device no process
// holds, whether the installed QEMU can live-migrate it (netctl probe).
func ProbeFull(devs []string) (*Result, error) {
	return probe(devs, kernel, Full)
}

// notNeeded is the Error of a section the caller did not ask for.
const notNeeded = "not probed: not needed for this decision"

// ProbeFor is Probe with only the parts p names among the costly ones;
// the sections left out say so in their Error. netctl attach uses it:
// it decides by the tap's offloads and asks the running QEMU its version,
// and each probe is paid on every attach (make bench's attach latency).
func ProbeFor(p Parts) (*Result, error) {
	return probe(nil, kernel, p)
}

func probe(devs []string, src sources, parts Parts) (*Result, error) {
	if len(devs) > MaxDevs {
		return nil, fmt.Errorf("probe: %d devices: name 0 to %d: %w", len(devs), MaxDevs, ErrInvalid)
	}
	for _, d := range devs {
		if d == "" || len(d) >= unix.IFNAMSIZ {
			return nil, fmt.Errorf("probe: --dev %.32q: a device name has 1 to %d characters: %w", d, unix.IFNAMSIZ-1, ErrInvalid)
		}
	}
	r := &Result{Schema: host.Schema, Tap: host.Tap{Offloads: []string{}},
		VDPA: host.VDPA{MgmtDevs: []string{}, Devices: []host.VDPADevice{}}}
	r.Hostname, r.Kernel = src.uname()
	if parts.VhostNetFeaturesOnly {
		src.vhostNetFeatures(&r.VhostNet)
	} else {
		src.vhostNet(&r.VhostNet)
	}
	if parts.Tap != nil {
		r.Tap = *parts.Tap
		r.Tap.Offloads = slices.Clone(parts.Tap.Offloads)
		if r.Tap.Offloads == nil {
			r.Tap.Offloads = []string{}
		}
	}
	src.scratch(r, parts.Tap == nil, parts.Macvtap)
	if !parts.Macvtap {
		r.Macvtap.Error = notNeeded
	}
	if parts.NoVDPA {
		// Only whether the kernel has vdpa at all (a stat), which the
		// decision's reason says first.
		r.VDPA.Error = VDPANotAsked
		if err := src.vdpaLoaded(); err != nil {
			r.VDPA.Error = err.Error()
		}
	} else {
		src.vdpa(&r.VDPA)
	}
	zc, err := src.zeroCopy()
	r.ZeroCopy = host.ZeroCopy{Loaded: zc.Loaded, Enabled: zc.Enabled, Threshold: zc.Threshold, Advice: zc.Advice}
	if err != nil {
		r.ZeroCopy.Error = err.Error()
	}
	if parts.QEMU {
		src.qemu(&r.QEMU)
	} else {
		r.QEMU.Error = notNeeded
	}
	if parts.VDPAMigration && parts.QEMU {
		vdpaMigration(r, src)
	}
	var seen []string
	for _, d := range devs {
		if slices.Contains(seen, d) {
			continue
		}
		seen = append(seen, d)
		dev := host.Device{Name: d}
		if f, err := src.devFeatures(d); err != nil {
			dev.Error = err.Error()
		} else {
			dev.Features = f
		}
		r.Devices = append(r.Devices, dev)
	}
	return r, nil
}

// probeVhostNetFeatures is probeVhostNet's first part: whether
// /dev/vhost-net opens, and its features.
func probeVhostNetFeatures(v *host.VhostNet) {
	d := openVhostNet(v)
	if d == nil {
		return
	}
	// Closing the last fd of a vhost-net device waits for the kernel to
	// release it (vhost_net_release flushes and waits for RCU): 15-20 ms
	// of an attach's probe in the TCG test VM, against 0.2 ms for the
	// open. Nothing the caller does needs that done, so it happens on a
	// goroutine of its own while the caller goes on (attach's QMP steps
	// take longer); a process that exits first finishes it at exit.
	go d.Close()
	if v.Error == "" {
		v.BusyPollError = notNeeded
	}
}

// openVhostNet opens /dev/vhost-net and reads its features into v; nil
// (v says why) when it does not open. The caller closes the device.
func openVhostNet(v *host.VhostNet) *vhostnet.Device {
	d, err := vhostnet.Open()
	if err != nil {
		v.Error = err.Error()
		v.BusyPollError = "no /dev/vhost-net to measure it on"
		return nil
	}
	v.Available = true
	f, err := d.Features()
	if err != nil {
		v.Error = err.Error()
		v.BusyPollError = "GET_FEATURES failed"
		return d
	}
	v.Features, v.FeaturesHex = f.Names(), fmt.Sprintf("%#x", uint64(f))
	return d
}

func probeVhostNet(v *host.VhostNet) {
	d := openVhostNet(v)
	if d == nil {
		return
	}
	defer d.Close()
	if v.Error != "" {
		return
	}
	if n, err := vhostnet.MaxMemRegions(); err != nil {
		v.Error = "max_mem_regions: " + err.Error()
	} else {
		v.MaxMemRegions = n
	}
	_, ferr := d.ForkFromOwner() // before SetOwner, which busy-poll needs
	v.ForkFromOwner = ferr == nil
	bp, err := measureBusyPoll(d)
	if err != nil {
		v.BusyPollError = err.Error()
		return
	}
	v.BusyPoll = &bp
}

// measureBusyPoll sets a busy-poll timeout on ring 0 and reads it back
// (the rings take ioctls only once the fd has an owner).
func measureBusyPoll(d *vhostnet.Device) (bool, error) {
	if err := d.SetOwner(); err != nil {
		return false, fmt.Errorf("busy-poll not measured: %w", err)
	}
	const usec = 50
	if err := d.SetBusyLoopTimeout(0, usec); err != nil {
		if errors.Is(err, vhostnet.ErrNotSupported) {
			return false, nil // no VHOST_SET_VRING_BUSYLOOP_TIMEOUT: Linux before 4.6
		}
		return false, fmt.Errorf("busy-poll not measured: %w", err)
	}
	got, err := d.BusyLoopTimeout(0)
	if err != nil {
		return false, fmt.Errorf("busy-poll not measured: %w", err)
	}
	return got == usec, d.SetBusyLoopTimeout(0, 0)
}

func probeVDPA(v *host.VDPA) {
	// The vdpa family can stall while a device delete waits for its fd to
	// close (every request blocks): the probe gives it 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := vdpa.Dial(ctx)
	if err != nil {
		v.Error = err.Error()
		if !errors.Is(err, vdpa.ErrNoVDPA) {
			v.Error = "vdpa: " + err.Error()
		}
		return
	}
	defer c.Close()
	v.Available = true
	mds, err := c.MgmtDevs(ctx)
	if err != nil {
		v.Error = err.Error()
		return
	}
	for _, m := range mds {
		v.MgmtDevs = append(v.MgmtDevs, m.Handle())
	}
	devs, err := c.Devices(ctx)
	if err != nil {
		v.Error = err.Error()
		return
	}
	for _, d := range devs {
		dev := host.VDPADevice{Name: d.Name}
		var whys []string
		drv, err := vdpa.BoundDriver(d.Name)
		if err != nil {
			whys = append(whys, "driver: "+err.Error())
		}
		dev.Driver = drv
		if cfg, err := c.Config(ctx, d.Name); err != nil {
			whys = append(whys, "features: "+err.Error())
		} else {
			dev.Features, dev.FeaturesHex = cfg.Features.Names(), fmt.Sprintf("%#x", uint64(cfg.Features))
		}
		if len(whys) > 0 {
			dev.Error = fmt.Sprint(whys)
		}
		v.Devices = append(v.Devices, dev)
	}
}
