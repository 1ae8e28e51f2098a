package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
)

// Monitor is what stats asks of a QEMU monitor: one QMP command, QEMU's
// "return" value back, its error reply as a *qmp.Error. A *qmp.Client
// (a socket netctl holds) and a *libvirtdom.Passthrough (a libvirt
// domain's, through virDomainQemuMonitorCommand) both are one.
type Monitor interface {
	Execute(ctx context.Context, cmd string, args any) (json.RawMessage, error)
}

// peerPID is the pid of the QEMU serving m, when m knows it.
func peerPID(m Monitor) (int, error) {
	if p, ok := m.(interface{ PeerPID() (int, error) }); ok {
		return p.PeerPID()
	}
	return 0, fmt.Errorf("the monitor does not say its peer: %w", ErrNotAvailable)
}

// LibvirtTarget is the libvirt domain of a target read through libvirt's
// API (its QMP monitor is libvirt's). (Extension of the agreed API.)
type LibvirtTarget struct {
	URI  string // the connection ("" = qemu:///system)
	UUID string // the domain's UUID (or name, when the UUID is not known)
	// Alias is the interface's alias in the domain: QEMU's device id
	// (the QOM path the x-query-virtio* commands take).
	Alias string
}

// NoMonitorWhy is why the rings of a libvirt domain's NIC are not read
// without Options.LibvirtMonitor.
const NoMonitorWhy = "not counted without --qemu-monitor: the rings' addresses only QEMU's monitor knows, and libvirt holds it; " +
	"--qemu-monitor asks QEMU through libvirt (virDomainQemuMonitorCommand), after which libvirt marks the domain \"tainted: custom-monitor\""

// NoMonitorQMPWhy is the qmp source's reason for a libvirt domain without
// Options.LibvirtMonitor.
const NoMonitorQMPWhy = "libvirt holds QEMU's monitor: not asked without --qemu-monitor (which asks through libvirt and taints the domain: custom-monitor)"

// linkStatser reads libvirt's counters of a domain's interface.
type linkStatser interface {
	InterfaceStats(ctx context.Context, dev string) (libvirtdom.IfaceStats, error)
}

// domainStats is a linkStatser for one domain of one connection.
type domainStats struct {
	c *libvirtdom.Conn
	d libvirtdom.Domain
}

func (s domainStats) InterfaceStats(ctx context.Context, dev string) (libvirtdom.IfaceStats, error) {
	return s.c.InterfaceStats(ctx, s.d, dev)
}

// lvMonitor is libvirt's passthrough with the QEMU pid that stats found
// for the domain (rings are read from that process's memory).
type lvMonitor struct {
	*libvirtdom.Passthrough
	pid int
}

func (m lvMonitor) PeerPID() (int, error) {
	if m.pid <= 0 {
		return 0, fmt.Errorf("the pid of domain %s's QEMU is not known: %w", m.Domain, ErrNotAvailable)
	}
	return m.pid, nil
}

// dialLibvirt is libvirtdom.Dial (tests replace it).
var dialLibvirt = libvirtdom.Dial

// libvirtSession opens a libvirt domain's session: a connection for
// libvirt's counters, and, only with Options.LibvirtMonitor, QEMU's
// monitor through libvirt (which taints the domain).
func (c *Collector) libvirtSession(ctx context.Context, t Target) *session {
	lc, err := dialLibvirt(ctx, t.Libvirt.URI)
	if err != nil {
		return &session{why: err.Error()}
	}
	ref := t.Libvirt.UUID
	if ref == "" {
		ref = t.VM
	}
	d, err := lc.Lookup(ctx, ref)
	if err != nil {
		lc.Close()
		why := err.Error()
		if errors.Is(err, os.ErrNotExist) {
			why = "VM gone: " + why
		}
		return &session{why: why}
	}
	s := &session{lv: domainStats{lc, d}, closer: func() { lc.Close() }, why: NoMonitorQMPWhy, rings: NoMonitorWhy}
	if c.o.LibvirtMonitor {
		pid := t.PID
		if pid <= 0 { // a record of netctl's knows no pid: the domain's QEMU by its name
			if v, err := qemuproc.Find(d.Name); err == nil && v.OfLibvirtDomain(d.UUID) {
				pid = v.PID
			}
		}
		s.c, s.why, s.rings, s.tainted = lvMonitor{lc.Passthrough(d), pid}, "", "", true
	}
	return s
}

// libvirtLink fills s.Link from libvirt's interface counters
// (virDomainInterfaceStats) when the host link could not be read here
// (the tap lives where netctl cannot see it): libvirt names them from the
// guest's side already.
func (c *Collector) libvirtLink(ctx context.Context, sess *session, s *NICStats) {
	t := s.Target
	if sess.lv == nil || s.Link != nil || t.Link == "" || t.Backend == policy.BackendVDPA {
		return
	}
	st, err := sess.lv.InterfaceStats(ctx, t.Link)
	if err != nil {
		s.missing(SourceLink, s.Missing[SourceLink]+"; libvirt's counters: "+err.Error())
		return
	}
	u := func(v int64) uint64 { return uint64(max(v, 0)) }
	s.Link = &LinkStats{
		RX: Counters{Packets: u(st.RxPackets), Bytes: u(st.RxBytes), Errors: u(st.RxErrs), Drops: u(st.RxDrop)},
		TX: Counters{Packets: u(st.TxPackets), Bytes: u(st.TxBytes), Errors: u(st.TxErrs), Drops: u(st.TxDrop)},
	}
	s.LinkTime = c.o.Now()
	delete(s.Missing, SourceLink)
	s.LinkFrom = "libvirt"
}

// LibvirtTargets lists the virtio interfaces of a running libvirt domain
// (name or UUID) from its live XML, through libvirt's API only: no QMP.
// Each target's NIC is the interface's alias (QEMU's device id), its link
// the <target dev>, its backend from <driver name> (vhost: vhost-net,
// qemu: userspace; none: vhost-net when QEMU holds /dev/vhost-net fds),
// its queue pairs from <driver queues>. QEMU's pid is found by the
// domain's name (qemuproc), for the vhost workers and the rings. (Extension
// of the agreed API.)
func LibvirtTargets(ctx context.Context, uri, domain string) ([]Target, error) {
	lc, err := dialLibvirt(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer lc.Close()
	d, err := lc.Lookup(ctx, domain)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if up, err := lc.Running(ctx, d); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	} else if !up {
		return nil, fmt.Errorf("stats: domain %s is not running (virsh start %s): %w", d.Name, d.Name, ErrNotAvailable)
	}
	b, err := lc.XML(ctx, d, false)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	x, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return nil, fmt.Errorf("stats: domain %s: %w", d.Name, err)
	}
	var pid int
	var start uint64
	if v, err := qemuproc.Find(d.Name); err == nil && v.OfLibvirtDomain(d.UUID) {
		pid, start = v.PID, v.StartTime
	}
	ts := domainTargets(x, pid, vhostNetFDs(pid) > 0)
	for i := range ts {
		ts[i].VM, ts[i].PIDStart = d.Name, start
		ts[i].Libvirt.URI, ts[i].Libvirt.UUID = uri, d.UUID
	}
	return ts, nil
}

// maxInterfaces bounds the interfaces read from one domain's XML.
const maxInterfaces = 1024

// domainTargets are the virtio interfaces of a live domain XML (pure).
// vhostFDs: QEMU holds /dev/vhost-net fds (an interface without <driver
// name> then runs vhost-net).
func domainTargets(x *libvirtxml.Domain, pid int, vhostFDs bool) []Target {
	if x == nil || x.Devices == nil {
		return nil
	}
	var ts []Target
	for i := range x.Devices.Interfaces[:min(len(x.Devices.Interfaces), maxInterfaces)] {
		ifc := &x.Devices.Interfaces[i]
		if ifc.Model == nil || !strings.HasPrefix(ifc.Model.Type, "virtio") {
			continue // not virtio-net: nothing netctl reads
		}
		r := libvirtdom.RunsOf(ifc)
		if r.Alias == "" {
			continue // libvirt gives every device of a live domain an alias
		}
		t := Target{NIC: r.Alias, PID: pid, QueuePairs: max(int(r.Queues), 1), Link: r.Target,
			Libvirt: &LibvirtTarget{Alias: r.Alias}}
		switch {
		case r.Type == "vdpa":
			t.Backend, t.NetdevType, t.Link, t.VDPA = policy.BackendVDPA, "vhost-vdpa", "", ""
		case ifc.Source != nil && ifc.Source.VHostUser != nil:
			t.Backend, t.NetdevType, t.Link = BackendVhostUser, "vhost-user", ""
		case r.Type == "user":
			t.Backend, t.NetdevType, t.Link = policy.BackendUserspace, "user", ""
		default: // ethernet, network, bridge, direct: a tap or macvtap
			t.NetdevType = "tap"
			t.Backend = policy.BackendUserspace
			if r.Driver == "vhost" || (r.Driver == "" && vhostFDs) {
				t.Backend = policy.BackendVhostNet
			}
		}
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b Target) int { return strings.Compare(a.NIC, b.NIC) })
	return ts
}
