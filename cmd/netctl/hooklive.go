package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/state"
)

// liveDomain is what hook status reads from libvirt about one domain
// with a record: what runs, beside what the record says was decided.
type liveDomain struct {
	// State: "running", "not running", "not defined", or "libvirt not
	// reachable: ..." (then nothing else is known).
	State string `json:"state"`
	// Interfaces maps a recorded interface's MAC to what runs for it
	// (its live XML's <interface>); a MAC the live domain lacks is absent.
	Interfaces map[string]libvirtdom.Runs `json:"interfaces,omitempty"`
}

// statusRecord is a hook record with what libvirt says runs.
type statusRecord struct {
	*state.Domain
	Live *liveDomain `json:"live,omitempty"`
}

// liveStatus asks libvirt (uri) what runs for each record, within
// timeout. It never fails: what it cannot learn is said in State.
func liveStatus(uri string, timeout time.Duration, recs []*state.Domain) []statusRecord {
	out := make([]statusRecord, len(recs))
	for i, r := range recs {
		out[i].Domain = r
	}
	if len(recs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := libvirtdom.Dial(ctx, uri)
	if err != nil {
		for i := range out {
			out[i].Live = &liveDomain{State: "libvirt not reachable: " + err.Error()}
		}
		return out
	}
	defer conn.Close()
	for i, r := range recs {
		out[i].Live = liveOf(ctx, conn, r)
	}
	return out
}

func liveOf(ctx context.Context, conn *libvirtdom.Conn, r *state.Domain) *liveDomain {
	ref := r.UUID // a rename or a new domain under the name is not taken for it
	if ref == "" {
		ref = r.Name
	}
	dom, err := conn.Lookup(ctx, ref)
	if errors.Is(err, os.ErrNotExist) {
		return &liveDomain{State: "not defined"}
	}
	if err != nil {
		return &liveDomain{State: "libvirt not reachable: " + err.Error()}
	}
	running, err := conn.Running(ctx, dom)
	if err != nil {
		return &liveDomain{State: "libvirt not reachable: " + err.Error()}
	}
	if !running {
		return &liveDomain{State: "not running"}
	}
	b, err := conn.XML(ctx, dom, false)
	if err != nil {
		return &liveDomain{State: "running; live XML unreadable: " + err.Error()}
	}
	d, err := libvirtdom.ParseDomain(b)
	if err != nil {
		return &liveDomain{State: "running; live XML unreadable: " + err.Error()}
	}
	// Whether a tap runs vhost-net: <driver name> may leave it to
	// libvirt, and the live XML does not say what it chose; QEMU's command
	// line does (read from /proc, for the system daemon on this host).
	var vhost map[string]bool
	if conn.Driver == "qemu:///system" {
		if args, err := libvirtdom.QEMUArgs(libvirtdom.SystemPIDDir, dom.Name); err == nil {
			vhost = libvirtdom.NetdevVhost(args)
		}
	}
	l := &liveDomain{State: "running", Interfaces: map[string]libvirtdom.Runs{}}
	for _, it := range r.Interfaces {
		m, err := net.ParseMAC(it.MAC)
		if err != nil {
			continue
		}
		if x := libvirtdom.InterfaceByMAC(d, m); x != nil {
			runs := libvirtdom.RunsOf(x)
			if v, ok := vhost[runs.Alias]; ok && runs.Type != "vdpa" {
				runs.VhostNet = map[bool]string{true: "on", false: "off"}[v]
			}
			l.Interfaces[m.String()] = runs
		}
	}
	return l
}

// runsLine is what the status prints for a recorded interface.
func (l *liveDomain) runsLine(mac string) string {
	if l == nil {
		return "not asked (--libvirt '')"
	}
	if l.State != "running" {
		return l.State
	}
	m, err := net.ParseMAC(mac)
	if err != nil {
		return "unknown (the record's MAC does not parse)"
	}
	r, ok := l.Interfaces[m.String()]
	if !ok {
		return fmt.Sprintf("the running domain has no interface %s", m)
	}
	return r.String()
}
