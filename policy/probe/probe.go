// Package probe finds out what this host's kernel offers netctl:
// vhost-net, tun and its offloads, macvtap, vDPA and zero-copy TX
// (netctl probe). Scratch devices are made in a throwaway network
// namespace, so probing changes nothing on the host.
package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/zerocopy"
)

// Result is what Probe found. The JSON keys are stable.
type Result struct {
	Kernel   string                     `json:"kernel"`
	VhostNet VhostNet                   `json:"vhost_net"`
	Tap      Tap                        `json:"tap"`
	Macvtap  Macvtap                    `json:"macvtap"`
	VDPA     VDPA                       `json:"vdpa"`
	ZeroCopy zerocopy.Status            `json:"zerocopy"`
	Devices  map[string]map[string]bool `json:"devices,omitempty"` // ethtool features of the devices asked for
}

// VhostNet is /dev/vhost-net's state.
type VhostNet struct {
	Available     bool     `json:"available"`
	Error         string   `json:"error,omitempty"`
	Features      []string `json:"features,omitempty"`
	FeaturesHex   string   `json:"features_hex,omitempty"`
	MaxMemRegions int      `json:"max_mem_regions,omitempty"`
	BusyPoll      bool     `json:"busy_poll"`       // VHOST_SET_VRING_BUSYLOOP_TIMEOUT (Linux 4.6+)
	ForkFromOwner bool     `json:"fork_from_owner"` // VHOST_SET_FORK_FROM_OWNER
}

// Tap is tun's state and the offloads a tap really takes (found by trial).
type Tap struct {
	Available bool     `json:"available"`
	Error     string   `json:"error,omitempty"`
	Offloads  []string `json:"offloads"`
}

// Macvtap says whether macvtap links can be made.
type Macvtap struct {
	Available bool     `json:"available"`
	Error     string   `json:"error,omitempty"`
	Offloads  []string `json:"offloads,omitempty"`
}

// VDPA is the vdpa family's state.
type VDPA struct {
	Available bool         `json:"available"`
	Error     string       `json:"error,omitempty"`
	MgmtDevs  []string     `json:"mgmtdevs"`
	Devices   []VDPADevice `json:"devices"`
}

// VDPADevice is a vdpa device and its bus driver.
type VDPADevice struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
}

// Probe looks at everything; devs names network devices whose features to
// read (lower devices of macvtaps or packet sockets).
func Probe(devs []string) (*Result, error) {
	var uts unix.Utsname
	unix.Uname(&uts)
	r := &Result{Kernel: unix.ByteSliceToString(uts.Release[:]), Tap: Tap{Offloads: []string{}},
		VDPA: VDPA{MgmtDevs: []string{}, Devices: []VDPADevice{}}}
	r.probeVhostNet()
	if err := r.probeScratch(); err != nil {
		return nil, err
	}
	r.probeVDPA()
	zc, err := zerocopy.Read()
	if err != nil {
		return nil, err
	}
	r.ZeroCopy = zc
	for _, d := range devs {
		f, err := macvtap.ReadFeatures(d)
		if err != nil {
			return nil, fmt.Errorf("probe: --dev %s: %w", d, err)
		}
		if r.Devices == nil {
			r.Devices = map[string]map[string]bool{}
		}
		r.Devices[d] = f.Active
	}
	return r, nil
}

func (r *Result) probeVhostNet() {
	d, err := vhostnet.Open()
	if err != nil {
		r.VhostNet.Error = err.Error()
		return
	}
	defer d.Close()
	r.VhostNet.Available = true
	f, err := d.Features()
	if err != nil {
		r.VhostNet.Error = err.Error()
		return
	}
	r.VhostNet.Features, r.VhostNet.FeaturesHex = f.Names(), fmt.Sprintf("%#x", uint64(f))
	r.VhostNet.MaxMemRegions, _ = vhostnet.MaxMemRegions()
	r.VhostNet.BusyPoll = true // in vhost since 4.6, older than any kernel netctl supports
	_, ferr := d.ForkFromOwner()
	r.VhostNet.ForkFromOwner = ferr == nil
}

// probeScratch makes a scratch tap (and a macvtap on a veth) in a
// throwaway network namespace and finds their offloads by trial.
func (r *Result) probeScratch() error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread and its namespace end with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("probe: a scratch network namespace needs CAP_SYS_ADMIN (run as root): %w", err)
			return
		}
		// A private /sys that shows the scratch namespace (macvtap's tapN
		// numbers are read there), mounted only in this thread's view.
		unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		unix.Mount("sysfs", "/sys", "sysfs", 0, "")
		tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "probe0", VnetHdr: true})
		if err != nil {
			r.Tap.Error = err.Error()
		} else {
			r.Tap.Available = true
			if o, err := macvtap.ProbeOffloads(macvtap.KindTap); err == nil {
				r.Tap.Offloads = o.Names()
			}
			tap.Close()
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "probev0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "probev1"}); err != nil {
			r.Macvtap.Error = "no veth to put a macvtap on: " + err.Error()
			done <- nil
			return
		}
		devDir, _ := os.MkdirTemp("", "netctl-probe-")
		defer os.RemoveAll(devDir)
		mv, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "probemv0", Lower: "probev0", DevDir: devDir})
		if err != nil {
			r.Macvtap.Error = err.Error()
		} else {
			r.Macvtap.Available = true
			if o, err := macvtap.ProbeOffloads(macvtap.KindMacvtap); err == nil {
				r.Macvtap.Offloads = o.Names()
			}
			mv.Close()
		}
		done <- nil
	}()
	return <-done
}

func (r *Result) probeVDPA() {
	c, err := vdpa.Dial(context.TODO())
	if err != nil {
		r.VDPA.Error = err.Error()
		if !errors.Is(err, vdpa.ErrNoVDPA) {
			r.VDPA.Error = "vdpa: " + err.Error()
		}
		return
	}
	defer c.Close()
	r.VDPA.Available = true
	mds, err := c.MgmtDevs(context.TODO())
	if err != nil {
		r.VDPA.Error = err.Error()
		return
	}
	for _, m := range mds {
		r.VDPA.MgmtDevs = append(r.VDPA.MgmtDevs, m.Handle())
	}
	devs, err := c.Devices(context.TODO())
	if err != nil {
		r.VDPA.Error = err.Error()
		return
	}
	for _, d := range devs {
		drv, _ := vdpa.BoundDriver(d.Name)
		r.VDPA.Devices = append(r.VDPA.Devices, VDPADevice{Name: d.Name, Driver: drv})
	}
}
