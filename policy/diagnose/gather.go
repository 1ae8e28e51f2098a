package diagnose

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/macvtap"
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

// Gather reads a running QEMU's NIC and its backend into a snapshot.
// Only QEMU's own answers are required; what the host could not tell is
// listed in Snapshot.Errors.
func Gather(ctx context.Context, c *qmp.Client, o Options) (*Snapshot, error) {
	s := &Snapshot{Format: Format}
	v := c.Greeting.QMP.Version.QEMU
	s.QEMU = fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro)

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
	s.readProps(ctx, c, dev)
	if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": "netdev"}, &s.Netdev.ID); err != nil {
		s.note("the NIC's netdev: %v", err)
	}
	s.readNetdev(ctx, c)
	pid, err := c.PeerPID()
	if err != nil {
		s.note("QEMU's process: %v", err)
	}
	if err := inNetns(pid, func() error {
		if s.Netdev.Type == "tap" {
			s.readTap(pid)
		}
		s.readLower(o.Lower)
		return nil
	}); err != nil {
		s.note("%v", err)
	}
	if s.Netdev.Type == "vhost-vdpa" {
		s.readVDPA(pid) // the vdpa family answers in the initial namespace only
	}
	if o.Probe {
		if h, err := probe.Probe(nil); err != nil {
			s.note("host probe: %v", err)
		} else {
			s.Host = h
		}
	}
	return s, nil
}

// readLower reads the lower device's features: the one named, or a
// macvtap's own link.
func (s *Snapshot) readLower(lower string) {
	if lower == "" && s.Tap != nil && s.Tap.Macvtap {
		if l, err := netlink.LinkByName(s.Tap.Name); err == nil && l.Attrs().ParentIndex > 0 {
			if l.Attrs().NetNsID >= 0 {
				s.note("the macvtap's lower device is in another network namespace; name it with --lower")
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
		s.note("lower device %s: %v", lower, err)
		return
	}
	s.Lower = &Lower{Name: lower, Features: f.Active}
}

func (s *Snapshot) note(format string, args ...any) {
	s.Errors = append(s.Errors, fmt.Sprintf(format, args...))
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

func (s *Snapshot) readProps(ctx context.Context, c *qmp.Client, dev string) {
	var list []struct{ Name, Type string }
	if err := c.Run(ctx, "qom-list", map[string]string{"path": dev}, &list); err != nil {
		s.note("the NIC's properties: %v", err)
		return
	}
	s.Props = map[string]bool{}
	for _, p := range list {
		if p.Type != "bool" || !slices.Contains(Props(), p.Name) {
			continue
		}
		var on bool
		if err := c.Run(ctx, "qom-get", map[string]string{"path": dev, "property": p.Name}, &on); err != nil {
			s.note("property %s: %v", p.Name, err)
			continue
		}
		s.Props[p.Name] = on
	}
}

// readNetdev finds the netdev's type and options in "info network" (QMP
// has no query for netdevs before QEMU 9).
func (s *Snapshot) readNetdev(ctx context.Context, c *qmp.Client) {
	if s.Netdev.ID == "" {
		return
	}
	var out string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": "info network"}, &out); err != nil {
		s.note("info network: %v", err)
		return
	}
	re := regexp.MustCompile(`(?m)^[ \\]*` + regexp.QuoteMeta(s.Netdev.ID) + `: (.*?)\r?$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		s.note("netdev %s is not in info network", s.Netdev.ID)
		return
	}
	s.Netdev.Options = map[string]string{}
	for _, kv := range strings.Split(m[1], ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "type" {
			s.Netdev.Type = v
		} else if k != "index" {
			s.Netdev.Options[k] = v
		}
	}
}

// ReadTap reads a tap or macvtap by name, for a snapshot made from a bare
// QMP reply (QEMU's fds are not looked at, so the header size stays
// unknown).
func (s *Snapshot) ReadTap(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("diagnose: tap %s: %w", name, err)
	}
	t := &TapState{Name: name, VnetHdr: true}
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
	t.setFeatures(f)
	s.Tap = t
	if s.Netdev.Type == "" {
		s.Netdev.Type = "tap"
	}
	return nil
}

// ReadHost adds the host probe and a lower device's features, as Gather
// does.
func (s *Snapshot) ReadHost(lower string) {
	s.readLower(lower)
	if h, err := probe.Probe(nil); err != nil {
		s.note("host probe: %v", err)
	} else {
		s.Host = h
	}
}

func (t *TapState) setFeatures(f *macvtap.DeviceFeatures) {
	t.Features = f.On()
	if t.Macvtap {
		t.Offloads, t.OffloadsUnknown = []string{}, true
		return
	}
	t.Offloads = TapOffloads(f.Active)
}

func (s *Snapshot) readTap(pid int) {
	if pid == 0 {
		return
	}
	fds, err := backendFDs(pid)
	if err != nil {
		s.note("tap: %v", err)
		return
	}
	name := s.Netdev.Options["ifname"]
	// libvirt passes taps as fd=N (fds=N:M for queues): those numbers name
	// QEMU's own descriptors, which tells two NICs' taps apart.
	var passed []int
	for _, v := range strings.FieldsFunc(s.Netdev.Options["fd"]+":"+s.Netdev.Options["fds"], func(r rune) bool { return r == ':' }) {
		if n, err := strconv.Atoi(v); err == nil {
			passed = append(passed, n)
		}
	}
	var mine []procFD
	for _, f := range fds {
		if len(passed) > 0 && !slices.Contains(passed, f.fd) {
			continue
		}
		switch {
		case f.iff != "" && (name == "" || f.iff == name):
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
	if len(names) != 1 {
		s.note("tap: QEMU (pid %d) holds %d taps; name the NIC's netdev with ifname= so netctl can tell", pid, len(names))
		return
	}
	t := &TapState{Name: mine[0].iff, Queues: len(mine), Macvtap: macvtapIndex(mine[0].target) > 0, Offloads: []string{}}
	flags, hdr, err := tunFlags(pid, mine[0].fd)
	if err != nil {
		s.note("tap %s: %v", t.Name, err)
		t.VnetHdr = true // QEMU offered offloads, so it has the header
	} else {
		t.VnetHdr, t.HdrLen = flags&linux.IFF_VNET_HDR != 0, hdr
	}
	if f, err := macvtap.ReadFeatures(t.Name); err != nil {
		s.note("tap %s offloads: %v", t.Name, err)
	} else {
		t.setFeatures(f)
	}
	s.Tap = t
}

func (s *Snapshot) readVDPA(pid int) {
	if pid == 0 {
		return
	}
	fds, err := backendFDs(pid)
	if err != nil {
		s.note("vdpa: %v", err)
		return
	}
	var paths []string
	for _, f := range fds {
		if strings.HasPrefix(f.target, "/dev/vhost-vdpa-") && !slices.Contains(paths, f.target) {
			paths = append(paths, f.target)
		}
	}
	if len(paths) != 1 {
		s.note("vdpa: QEMU (pid %d) holds %d vhost-vdpa devices; netctl reads one", pid, len(paths))
		return
	}
	name, err := vdpa.DeviceOfVhost(paths[0])
	if err != nil {
		s.note("%v", err)
		return
	}
	st := &VDPAState{Device: name, VhostPath: paths[0]}
	s.VDPA = st
	c, err := vdpa.Dial(context.TODO())
	if err != nil {
		s.note("%v", err)
		return
	}
	defer c.Close()
	if cfg, err := c.Config(context.TODO(), name); err != nil {
		s.note("vdpa dev config show %s: %v", name, err)
	} else {
		st.Features, st.Negotiated, st.HasNegotiated = uint64(cfg.Features), uint64(cfg.Negotiated), cfg.HasNegotiated
	}
	if d, err := c.Device(context.TODO(), name); err == nil {
		st.MgmtDev = d.MgmtDev
		if mds, err := c.MgmtDevs(context.TODO()); err == nil {
			for _, m := range mds {
				if m.Handle() == d.MgmtDev && m.HasDevFeatures {
					st.MgmtFeatures = uint64(m.DevFeatures)
				}
			}
		}
	}
}
