// Package gather reads what netctl diagnose explains: it asks a running
// QEMU over QMP (the NIC's status, properties, its type's defaults) and
// looks at QEMU's process and the NIC's backend on the host (the -device
// option in /proc/PID/cmdline; QEMU's file descriptors through /proc and
// pidfd_getfd, a tap told by tun's fdinfo "iff:" line whatever path it
// reads as; ethtool netlink, the vdpa family, the host probe) and fills a
// diagnose.Snapshot. The explanation
// itself (diagnose.Explain) is pure and lives apart from this package, so
// a saved snapshot explains anywhere.
//
// Gathering changes nothing that QEMU or its guest sees: it duplicates
// QEMU's tap fd (pidfd_getfd) to read its flags and closes the copy, and
// it reads links and features. Only the host probe (Options.Probe,
// ReadHost) makes anything: scratch devices in a private network
// namespace; see policy/probe.
package gather

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/policy/diagnose"
	"github.com/netctl/netctl/policy/probe"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/vdpa"
)

// Options say which NIC to read and what else to look at.
type Options struct {
	ID    string // the NIC's qdev id (-device ...,id=ID); "" picks the only virtio-net NIC
	Lower string // a device whose ethtool features to read (the uplink); a macvtap's own link by default
	Probe bool   // probe the host too (tun offloads by trial; needs root)
}

// Monitor is what gathering asks of QEMU's monitor: one QMP command,
// its "return" value decoded into out, QEMU's error reply as a
// *qmp.Error. A *qmp.Client is one, and so is libvirt's passthrough
// (libvirtdom.Passthrough), for a domain whose monitor libvirt holds.
type Monitor interface {
	Run(ctx context.Context, cmd string, args, out any) error
}

// Gather reads a running QEMU's NIC and its backend into a snapshot.
// Only QEMU's own answers are required; what the host could not tell is
// listed in Snapshot.Errors.
func Gather(ctx context.Context, c *qmp.Client, o Options) (*diagnose.Snapshot, error) {
	v := c.Greeting.QMP.Version.QEMU
	pid, err := c.PeerPID()
	return gather(ctx, c, fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro), pid, err, o)
}

// GatherVia is Gather over another monitor m (libvirt's passthrough) of
// the QEMU whose pid is pid (0: unknown; then QEMU's fds and command
// line are not read). QEMU's version is asked (query-version).
func GatherVia(ctx context.Context, m Monitor, pid int, o Options) (*diagnose.Snapshot, error) {
	var v struct {
		QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
	}
	if err := m.Run(ctx, "query-version", nil, &v); err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	var perr error
	if pid <= 0 {
		pid, perr = 0, errors.New("not known (QEMU's fds and command line are not read)")
	}
	return gather(ctx, m, fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro), pid, perr, o)
}

func gather(ctx context.Context, c Monitor, version string, pid int, pidErr error, o Options) (*diagnose.Snapshot, error) {
	s := &diagnose.Snapshot{Format: diagnose.Format, QEMU: version}

	var devs []struct{ Path, Name string }
	if err := c.Run(ctx, "x-query-virtio", nil, &devs); err != nil {
		var qe *qmp.Error
		if errors.As(err, &qe) && qe.Class == "CommandNotFound" {
			return nil, fmt.Errorf("diagnose: QEMU %s has no x-query-virtio: it needs QEMU 7.2 or newer", s.QEMU)
		}
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	var nics []string
	for _, d := range devs {
		if d.Name == "virtio-net" {
			nics = append(nics, d.Path)
		}
	}
	switch {
	case len(nics) == 0:
		return nil, fmt.Errorf("diagnose: this QEMU has no virtio-net device")
	case o.ID != "":
		want := "/machine/peripheral/" + o.ID + "/virtio-backend"
		if !slices.Contains(nics, want) {
			return nil, fmt.Errorf("diagnose: no virtio-net NIC with id %q; the NICs are: %s", o.ID, strings.Join(nicIDs(nics), ", "))
		}
		s.Path = want
	case len(nics) > 1:
		return nil, fmt.Errorf("diagnose: QEMU has %d virtio-net NICs (%s): pick one with --id", len(nics), strings.Join(nicIDs(nics), ", "))
	default:
		s.Path = nics[0]
	}
	s.NIC = nicIDs([]string{s.Path})[0]
	if err := c.Run(ctx, "x-query-virtio-status", map[string]string{"path": s.Path}, &s.Status); err != nil {
		return nil, fmt.Errorf("diagnose: %w", err)
	}
	dev := strings.TrimSuffix(s.Path, "/virtio-backend")
	readProps(ctx, s, c, dev)
	readDefaults(ctx, s, c, dev)
	if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": "netdev"}, &s.Netdev.ID); err != nil {
		s.Note("the NIC's netdev: %v", err)
	}
	readNetdev(ctx, s, c)
	if pidErr != nil {
		s.Note("QEMU's process: %v", pidErr)
	}
	readCmdline(s, pid)
	if err := inNetns(pid, func() error {
		if s.Netdev.Type == "tap" {
			readTap(s, pid)
		}
		readLower(s, o.Lower)
		return nil
	}); err != nil {
		s.Note("%v", err)
	}
	if s.Netdev.Type == "vhost-vdpa" {
		readVDPA(ctx, s, pid) // the vdpa family answers in the initial namespace only
	}
	if o.Probe {
		readProbe(s)
	}
	return s, nil
}

// readLower reads the lower device's features: the one named, or a
// macvtap's own link.
func readLower(s *diagnose.Snapshot, lower string) {
	if lower == "" && s.Tap != nil && s.Tap.Macvtap {
		if l, err := netlink.LinkByName(s.Tap.Name); err == nil && l.Attrs().ParentIndex > 0 {
			if l.Attrs().NetNsID >= 0 {
				s.Note("the macvtap's lower device is in another network namespace; name it with --lower")
				return
			}
			if p, err := netlink.LinkByIndex(l.Attrs().ParentIndex); err == nil {
				lower = p.Attrs().Name
			}
		}
	}
	if lower == "" {
		return
	}
	f, err := macvtap.ReadFeatures(lower)
	if err != nil {
		s.Note("lower device %s: %v", lower, err)
		return
	}
	s.Lower = &diagnose.Lower{Name: lower, Features: f.Active}
}

// readProbe runs the host probe (scratch devices in a private network
// namespace, see policy/probe) and keeps its JSON in s.Host.
func readProbe(s *diagnose.Snapshot) {
	h, err := probe.Probe(nil)
	if err != nil {
		s.Note("host probe: %v", err)
		return
	}
	b, err := json.Marshal(h)
	if err != nil {
		s.Note("host probe: %v", err)
		return
	}
	s.Host = b
}

// nicIDs turns QOM paths into the ids users gave (-device ...,id=ID).
func nicIDs(paths []string) []string {
	var ids []string
	for _, p := range paths {
		p = strings.TrimSuffix(p, "/virtio-backend")
		if id, ok := strings.CutPrefix(p, "/machine/peripheral/"); ok {
			ids = append(ids, id)
		} else {
			ids = append(ids, p+" (no id)")
		}
	}
	return ids
}

func readProps(ctx context.Context, s *diagnose.Snapshot, c Monitor, dev string) {
	var list []struct{ Name, Type string }
	if err := c.Run(ctx, "qom-list", map[string]string{"path": dev}, &list); err != nil {
		s.Note("the NIC's properties: %v", err)
		return
	}
	s.Props = map[string]bool{}
	for _, p := range list {
		if p.Type != "bool" || !slices.Contains(diagnose.Props(), p.Name) {
			continue
		}
		var on bool
		if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": p.Name}, &on); err != nil {
			s.Note("property %s: %v", p.Name, err)
			continue
		}
		s.Props[p.Name] = on
	}
}

// readDefaults reads the NIC's type and that type's default feature
// property values (device-list-properties): what the device offers
// unless something drops it.
func readDefaults(ctx context.Context, s *diagnose.Snapshot, c Monitor, dev string) {
	var typ string
	if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": "type"}, &typ); err != nil {
		s.Note("the NIC's type: %v", err)
		return
	}
	s.Driver = typ
	var props []qomProperty
	if err := c.Run(ctx, "device-list-properties", map[string]string{"typename": typ}, &props); err != nil {
		s.Note("the defaults of %s: %v", typ, err)
		return
	}
	s.Defaults = deviceDefaults(props)
}

// readCmdline reads which feature properties the NIC's -device option
// sets on QEMU's command line. A hot-plugged NIC is not there: then
// Cmdline stays nil (unknown).
func readCmdline(s *diagnose.Snapshot, pid int) {
	if pid == 0 || s.NIC == "" {
		return
	}
	b, err := readBounded(fmt.Sprintf("/proc/%d/cmdline", pid), maxCmdline)
	if err != nil {
		s.Note("QEMU's command line: %v", err)
		return
	}
	driver, props, found, err := deviceOption(b, s.NIC)
	switch {
	case err != nil:
		s.Note("QEMU's command line: %v", err)
	case found:
		s.Cmdline = props
		if s.Driver == "" {
			s.Driver = driver
		}
	}
}

// readNetdev finds the netdev's type and options in "info network" (QMP
// has no query for netdevs before QEMU 9).
func readNetdev(ctx context.Context, s *diagnose.Snapshot, c Monitor) {
	if s.Netdev.ID == "" {
		return
	}
	var out string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &out); err != nil {
		s.Note("info network: %v", err)
		return
	}
	nd, err := diagnose.ParseInfoNetwork(out, s.Netdev.ID)
	if err != nil {
		s.Note("%v", err)
		return
	}
	s.Netdev = nd
}

// ReadTap reads a tap or macvtap by name into s, for a snapshot made from
// a bare QMP reply (QEMU's fds are not looked at, so the header size stays
// unknown).
func ReadTap(s *diagnose.Snapshot, name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("diagnose: tap %s: %w", name, err)
	}
	t := &diagnose.TapState{Name: name, VnetHdr: true}
	switch l := l.(type) {
	case *netlink.Tuntap:
		t.VnetHdr = l.Flags&netlink.TUNTAP_VNET_HDR != 0
		t.Queues = l.Queues
	case *netlink.Macvtap:
		t.Macvtap = true
	default:
		return fmt.Errorf("diagnose: %s is a %s link, not a tap or macvtap", name, l.Type())
	}
	f, err := macvtap.ReadFeatures(name)
	if err != nil {
		return fmt.Errorf("diagnose: tap %s offloads: %w", name, err)
	}
	setFeatures(t, f)
	s.Tap = t
	if s.Netdev.Type == "" {
		s.Netdev.Type = "tap"
	}
	return nil
}

// ReadHost adds the host probe and a lower device's features to s, as
// Gather does.
func ReadHost(s *diagnose.Snapshot, lower string) {
	readLower(s, lower)
	readProbe(s)
}

func setFeatures(t *diagnose.TapState, f *macvtap.DeviceFeatures) {
	t.Features = f.On()
	if t.Macvtap {
		t.Offloads, t.OffloadsUnknown = []string{}, true
		return
	}
	t.Offloads = diagnose.TapOffloads(f.Active)
}

func readTap(s *diagnose.Snapshot, pid int) {
	if pid == 0 {
		return
	}
	fds, err := backendFDs(pid)
	if err != nil {
		s.Note("tap: %v", err)
		return
	}
	name := s.Netdev.Options["ifname"]
	// libvirt passes taps as fd=N (fds=N:M for queues): those numbers name
	// QEMU's own descriptors, which tells two NICs' taps apart.
	passed := passedFDs(s.Netdev.Options)
	var mine []procFD
	for _, f := range fds {
		if len(passed) > 0 && !slices.Contains(passed, f.fd) {
			continue
		}
		if f.err != nil {
			s.Note("QEMU's fd %d: %v", f.fd, f.err)
		}
		switch {
		case f.tun && f.iff != "" && (name == "" || f.iff == name):
			mine = append(mine, f)
		case macvtapIndex(f.target) > 0:
			if l, err := netlink.LinkByIndex(macvtapIndex(f.target)); err == nil && (name == "" || l.Attrs().Name == name) {
				f.iff = l.Attrs().Name
				mine = append(mine, f)
			}
		}
	}
	names := map[string]bool{}
	for _, f := range mine {
		names[f.iff] = true
	}
	switch {
	case len(names) == 0 && name != "":
		s.Note("tap: QEMU (pid %d) holds no tap named %s (the netdev's ifname=); is the tap in another network namespace?", pid, name)
		return
	case len(names) == 0:
		s.Note("tap: QEMU (pid %d) holds no tap or macvtap that netctl can read", pid)
		return
	case len(names) > 1 && len(passed) > 0:
		s.Note("tap: the netdev's fd= names %d taps in QEMU (pid %d); netctl reads one", len(names), pid)
		return
	case len(names) > 1:
		s.Note("tap: QEMU (pid %d) holds %d taps; name the NIC's netdev with ifname= so netctl can tell", pid, len(names))
		return
	}
	t := &diagnose.TapState{Name: mine[0].iff, Queues: len(mine), Macvtap: macvtapIndex(mine[0].target) > 0, Offloads: []string{}}
	flags, hdr, err := tunFlags(pid, mine[0].fd)
	if err != nil {
		s.Note("tap %s: %v", t.Name, err)
		t.VnetHdr = true // QEMU offered offloads, so it has the header
	} else {
		t.VnetHdr, t.HdrLen = flags&linux.IFF_VNET_HDR != 0, hdr
	}
	if f, err := macvtap.ReadFeatures(t.Name); err != nil {
		s.Note("tap %s offloads: %v", t.Name, err)
	} else {
		setFeatures(t, f)
	}
	s.Tap = t
}

// readVDPA reads the vdpa device behind QEMU's vhost-vdpa fd. Every vdpa
// request is bounded by ctx: the family stalls while a vdpa dev del waits
// for a vhost-vdpa fd to close.
func readVDPA(ctx context.Context, s *diagnose.Snapshot, pid int) {
	if pid == 0 {
		return
	}
	fds, err := backendFDs(pid)
	if err != nil {
		s.Note("vdpa: %v", err)
		return
	}
	var paths []string
	for _, f := range fds {
		if isVhostVDPA(f.target) && !slices.Contains(paths, f.target) {
			paths = append(paths, f.target)
		}
	}
	if len(paths) == 0 {
		// Say why there is none when the kernel cannot have one.
		c, err := vdpa.Dial(ctx)
		if err != nil {
			s.Note("QEMU's netdev is vhost-vdpa, but QEMU (pid %d) holds no vhost-vdpa device: %v", pid, err)
			return
		}
		c.Close()
	}
	if len(paths) != 1 {
		s.Note("vdpa: QEMU (pid %d) holds %d vhost-vdpa devices; netctl reads one", pid, len(paths))
		return
	}
	name, err := vdpa.DeviceOfVhost(paths[0])
	if err != nil {
		s.Note("%v", err)
		return
	}
	st := &diagnose.VDPAState{Device: name, VhostPath: paths[0]}
	s.VDPA = st
	c, err := vdpa.Dial(ctx)
	if err != nil {
		s.Note("%v", err)
		return
	}
	defer c.Close()
	if cfg, err := c.Config(ctx, name); err != nil {
		s.Note("vdpa dev config show %s: %v", name, err)
	} else {
		st.Features, st.Negotiated, st.HasNegotiated = uint64(cfg.Features), uint64(cfg.Negotiated), cfg.HasNegotiated
	}
	if d, err := c.Device(ctx, name); err == nil {
		st.MgmtDev = d.MgmtDev
		if mds, err := c.MgmtDevs(ctx); err == nil {
			for _, m := range mds {
				if m.Handle() == d.MgmtDev && m.HasDevFeatures {
					st.MgmtFeatures = uint64(m.DevFeatures)
				}
			}
		}
	}
}
