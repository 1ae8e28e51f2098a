package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
)

// Hook runs the libvirt qemu hook's operations. Not safe for concurrent
// use; two processes serialise per domain through the state lock.
type Hook struct {
	Config *Config
	// ConfigErr is why the host config did not load (Config is then
	// nil).
	ConfigErr error
	// Store holds the records; StoreErr is why it did not open (Store
	// is then nil): a domain netctl manages nothing in passes all the
	// same.
	Store    *state.Store
	StoreErr error
	Devices  Devices
	// Log receives one line per step (the log file; the CLI adds stderr
	// for failures). Nil discards.
	Log io.Writer
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// QEMUVersion, when set, is the version of the QEMU libvirt starts
	// the domain with ("7.2.0", libvirt's virConnectGetVersion), which
	// Decide decides for instead of the probe's (the QEMU in PATH, when
	// there is one): netctl hook pin writes QEMU properties into the
	// definition, and QEMU refuses to start with one it lacks.
	QEMUVersion string
}

func (h *Hook) logf(format string, a ...any) {
	if h.Log != nil {
		fmt.Fprintf(h.Log, "%s netctl hook: "+format+"\n", append([]any{h.now().UTC().Format(time.RFC3339)}, a...)...)
	}
}

func (h *Hook) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Result says what one operation did, for the log and the CLI.
type Result struct {
	Domain string   `json:"domain"`
	Op     string   `json:"op"`
	Done   []string `json:"done,omitempty"`
	Notes  []string `json:"notes,omitempty"`
}

// Run dispatches one hook call (`qemu DOMAIN OP SUBOP EXTRA`); domainXML
// is stdin. The hook never stands in the way of what it does not
// manage: operations it has nothing to do in (start, stopped, restore,
// attach, and any libvirt adds later) succeed at once without reading
// the XML or the config, and a domain with nothing netctl manages passes
// prepare, reconnect and migrate begin whatever its XML holds and
// whatever state the host config is in (ConfigErr). Only an interface
// netctl was asked to manage can make prepare or migrate begin
// (MigrateBegin, on the destination of an incoming migration) fail.
// started, reconnect and release never fail for a reason libvirt could
// act on: libvirt stops a domain whose started hook fails and kills one
// whose reconnect hook fails, so those log and note instead. release also reads the
// domain's <uuid> from the XML (nothing else): what netctl attach --vm
// made for the domain is recorded under it, and goes too
// (releaseAttached).
func (h *Hook) Run(ctx context.Context, domain, op, subop string, domainXML io.Reader) (*Result, error) {
	res, err := h.run(ctx, domain, op, subop, domainXML)
	if err != nil && op == "reconnect" && subop == "begin" {
		note := fmt.Sprintf("%v: record not rebuilt; the domain keeps running (libvirt kills a domain whose reconnect hook fails)", err)
		h.logf("%s %s", clip(domain), note)
		return &Result{Domain: domain, Op: op, Notes: []string{note}}, nil
	}
	return res, err
}

func (h *Hook) run(ctx context.Context, domain, op, subop string, domainXML io.Reader) (*Result, error) {
	switch op + " " + subop {
	case "prepare begin", "reconnect begin", "migrate begin":
	case "started begin":
		return h.Started(ctx, domain), nil
	case "release end":
		// What netctl attach --vm made for the domain is keyed by its
		// UUID, which only the XML on stdin says.
		uuid := domainUUID(domainXML)
		res, err := h.Release(ctx, domain)
		if res == nil {
			res = &Result{Domain: domain, Op: op}
		}
		h.releaseAttached(ctx, domain, uuid, res)
		if err != nil {
			return nil, err
		}
		return res, nil
	default:
		return &Result{Domain: domain, Op: op}, nil
	}
	passBy := func(why string) (*Result, error) {
		h.logf("%s %s: passed by: %s", clip(domain), op, why)
		return &Result{Domain: domain, Op: op}, nil
	}
	b, over, err := ReadXML(domainXML)
	if err != nil {
		return passBy(err.Error())
	}
	marks := Marks(h.Config)
	if over {
		if !drainMarked(b, domainXML, marks) {
			return passBy(fmt.Sprintf("a domain XML over %d bytes that does not name netctl", MaxXML))
		}
		return nil, fmt.Errorf("domain %s: its XML names netctl but is over %d bytes, more than the hook reads: %w", clip(domain), MaxXML, errs.ErrInvalid)
	}
	if !hasAny(b, marks) {
		return passBy("nothing in the domain XML is netctl's")
	}
	// A mark is only a hint (the namespace URI may sit in another
	// namespace's text, a comment or a CDATA section; the vdpa directory
	// in a disk's path): without a config, the defaults tell which
	// interfaces the domain itself asks netctl for, and only those make
	// the broken config refuse the start.
	cfg, configErr := h.Config, h.ConfigErr
	if configErr != nil {
		cfg = DefaultConfig()
	}
	refuse := func(err error) (*Result, error) {
		if configErr != nil {
			return nil, fmt.Errorf("domain %s names netctl in its XML, and netctl's host config does not load: %w", clip(domain), configErr)
		}
		return nil, err
	}
	p, err := ParsePlan(b, cfg)
	if err != nil {
		if ue := (*unreadableError)(nil); errors.As(err, &ue) && !bytes.Contains(b, []byte(Namespace)) {
			return passBy(err.Error() + " (and it has no netctl metadata)")
		}
		return refuse(err)
	}
	if len(p.Interfaces) == 0 {
		return passBy("no interface in it is netctl's")
	}
	if configErr != nil {
		return refuse(nil)
	}
	if p.Domain != domain {
		return nil, fmt.Errorf("the XML on stdin is domain %q, the arguments name %q: %w", clip(p.Domain), clip(domain), errs.ErrInvalid)
	}
	if op == "migrate" {
		// Checks only: it needs no records.
		return h.MigrateBegin(ctx, p)
	}
	if h.Store == nil {
		return nil, fmt.Errorf("domain %s: netctl's records: %w", clip(domain), h.StoreErr)
	}
	if op == "prepare" {
		// A run that ended without its release (libvirtd died, or the
		// release found an attach holding the lock) may have left what
		// netctl attach made for it: the domain is not running, so it
		// goes now, before its taps' names are needed again.
		pre := &Result{}
		h.releaseAttached(ctx, domain, strings.ToLower(p.UUID), pre)
		res, err := h.Prepare(ctx, p)
		if res != nil {
			res.Done, res.Notes = append(pre.Done, res.Done...), append(pre.Notes, res.Notes...)
		}
		return res, err
	}
	return h.Reconnect(ctx, p)
}

func (h *Hook) lock(ctx context.Context, domain string) (*state.Lock, error) {
	l, err := h.Store.Lock(ctx, state.DomainLockKey(domain))
	if err != nil {
		return nil, fmt.Errorf("domain %s: waiting for another netctl hook call on it: %w", domain, err)
	}
	return l, nil
}

// Prepare creates what the plan asks. Each created device is recorded
// before the next step, so a release after a crash finds it; on failure
// every step is undone and the record removed. A record left by an
// earlier start that was never released is released first.
func (h *Hook) Prepare(ctx context.Context, p *Plan) (res *Result, err error) {
	res = &Result{Domain: p.Domain, Op: "prepare"}
	if len(p.Interfaces) == 0 {
		h.logf("%s prepare: no interface for netctl", p.Domain)
		return res, nil
	}
	l, err := h.lock(ctx, p.Domain)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if old, err := h.loadDomain(p.Domain); err == nil {
		h.logf("%s prepare: a record from an earlier start was not released; releasing it first", p.Domain)
		if err := h.release(ctx, old, res); err != nil {
			return nil, fmt.Errorf("domain %s: releasing what an earlier start left: %w", p.Domain, err)
		}
	} else if !errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	ns, _ := state.NetNS()
	rec := &state.Domain{Schema: state.DomainSchema, Name: p.Domain, UUID: p.UUID, Status: state.DomainPrepared,
		NetNS: ns, Prepared: h.now().UTC(), Updated: h.now().UTC()}
	var undo []func()
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		if rerr := h.Store.RemoveDomain(p.Domain); rerr != nil {
			h.logf("%s prepare: undo: %v", p.Domain, rerr)
		}
		h.logf("%s prepare failed, undone: %v", p.Domain, err)
		res = nil
	}()
	save := func() error {
		rec.Updated = h.now().UTC()
		return h.Store.SaveDomain(rec)
	}
	// Direct interfaces first: they create nothing, and a missing lower
	// device should stop the start before anything is made.
	for i, it := range p.Interfaces {
		if it.Kind != KindDirect {
			continue
		}
		notes, err := h.Devices.DirectNotes(it.Name)
		if err != nil {
			return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
		}
		for _, n := range notes {
			h.logf("%s prepare: %s", p.Domain, n)
		}
		res.Notes = append(res.Notes, notes...)
		rec.Notes = append(rec.Notes, notes...)
	}
	if len(rec.Notes) > state.MaxDomainNotes {
		rec.Notes = rec.Notes[:state.MaxDomainNotes]
	}
	// Decide for every interface before anything is made; a vdpa
	// interface is decided once its device exists (its features are the
	// device's), and a refusal then deletes it again.
	desc, err := h.Devices.Probe(ctx, hostnic.ProbeSpec{QEMU: true, Macvtap: slices.ContainsFunc(p.Interfaces, func(it Interface) bool { return it.Kind == KindDirect })})
	if err != nil {
		return nil, fmt.Errorf("domain %s: probing the host: %w", p.Domain, err)
	}
	decided := func(i int, it Interface, d policy.Decision) {
		h.logf("%s prepare: %s", p.Domain, summary(it, ifaceName(it.MAC, i), d))
		for _, n := range d.Notes {
			// The pool's plan: what this host cannot carry of it.
			h.logf("%s prepare: interface %s: %s", p.Domain, ifaceName(it.MAC, i), n)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("interface %s: backend %s, profile %s", ifaceName(it.MAC, i), d.Backend, firstNonEmpty(it.Profile, policy.Throughput)))
		rec.Interfaces = append(rec.Interfaces, record(it, d))
	}
	for i, it := range p.Interfaces {
		if it.Kind == KindVDPA {
			continue
		}
		d, err := decide(desc, p.Type, it, nil, h.Config.Pool(), ifaceName(it.MAC, i))
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
		}
		decided(i, it, d)
	}
	for i, it := range p.Interfaces {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("domain %s: the hook's timeout ran out: %w", p.Domain, err)
		}
		switch it.Kind {
		case KindTap:
			// The intent first (ifindex 0: not made yet), so that a
			// crash between the create and the next save leaves a record
			// by which a release or the next prepare finds the tap.
			rec.Taps = append(rec.Taps, state.HookTap{Link: state.Link{Name: it.Name, Created: true},
				MAC: macString(it), Queues: max(it.Queues, 1), Owner: p.Owner, MTU: it.MTU})
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			ifindex, err := h.Devices.CreateTap(tapSpec(it, p.Owner))
			if err != nil {
				rec.Taps = rec.Taps[:len(rec.Taps)-1]
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			undo = append(undo, func() {
				if _, err := h.Devices.DeleteTap(it.Name, ifindex); err != nil {
					h.logf("%s prepare: undo: %v", p.Domain, err)
				}
			})
			rec.Taps[len(rec.Taps)-1].Ifindex = ifindex
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			d := fmt.Sprintf("created tap %s (ifindex %d, %d queue(s), vnet_hdr, %s", it.Name, ifindex, max(it.Queues, 1), ownerText(p.Owner))
			if it.MTU != 0 {
				d += fmt.Sprintf(", mtu %d", it.MTU)
			}
			res.Done = append(res.Done, d+")")
			h.logf("%s prepare: %s", p.Domain, d+")")
		case KindVDPA:
			if err := hostnic.CheckUnpublished(it.Link); err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			// The intent first (no node, no identity: not made yet), as
			// for a tap: a crash between the create and the next save
			// leaves a record by which a release or the next prepare
			// deletes the device.
			rec.VDPAs = append(rec.VDPAs, state.HookVDPA{VDPA: state.VDPA{Name: it.Name, Mgmtdev: it.Mgmtdev, Created: true}, MAC: macString(it)})
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			vhost, err := h.Devices.CreateVDPA(ctx, vdpaSpec(it, h.Config.Pool()))
			if err != nil {
				rec.VDPAs = rec.VDPAs[:len(rec.VDPAs)-1]
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			undo = append(undo, func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if err := h.Devices.DeleteVDPA(dctx, it.Name); err != nil {
					h.logf("%s prepare: undo: %v", p.Domain, err)
				}
			})
			id, err := h.Devices.VDPAIdentity(it.Name)
			if err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			// The link is recorded before it is published (checkLinkFree
			// found none; release removes it only if it points at
			// vhost), so that a crash between publishing and the next
			// save leaves no link that stops the next prepare.
			hv := state.HookVDPA{VDPA: state.VDPA{Name: it.Name, Mgmtdev: it.Mgmtdev, Vhost: vhost, Created: true}, MAC: macString(it), Link: it.Link, SysfsIno: id}
			rec.VDPAs[len(rec.VDPAs)-1] = hv
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			// Recorded first (a crash from here on leaves a record the
			// next release finds), then decided by its own features.
			dev, err := h.Devices.DescribeVDPA(ctx, it.Name)
			if err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			dec, err := decide(desc, p.Type, it, &dev, h.Config.Pool(), ifaceName(it.MAC, i))
			if err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			decided(i, it, dec)
			if err := publishVDPA(it.Link, vhost); err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			undo = append(undo, func() { hostnic.Unpublish(it.Link, vhost) })
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			d := fmt.Sprintf("created vdpa %s from %s (%s, published as %s)", it.Name, it.Mgmtdev, vhost, it.Link)
			res.Done = append(res.Done, d)
			h.logf("%s prepare: %s", p.Domain, d)
			if note := vdpaMACNote(ctx, h.Devices, it, ifaceName(it.MAC, i)); note != "" {
				res.Notes = append(res.Notes, note)
				h.logf("%s prepare: %s", p.Domain, note)
			}
		}
	}
	if len(rec.Taps) == 0 && len(rec.VDPAs) == 0 {
		// Only direct interfaces: keep the notes and decisions for hook status.
		if err := save(); err != nil {
			return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
		}
	}
	return res, nil
}

// vdpaMACNote says when the guest will not see the interface's <mac>:
// QEMU gives it the vdpa device's own MAC (from its config space) when
// the device has one, and a management device that takes no MAC (VDUSE:
// its device owner sets it) keeps its own. The hook cannot rewrite the
// XML at prepare: it says so, naming both. "" when they agree.
func vdpaMACNote(ctx context.Context, d Devices, it Interface, iface string) string {
	dm, err := d.VDPAMAC(ctx, it.Name)
	if err != nil || dm == nil || it.MAC == nil || dm.String() == it.MAC.String() {
		return ""
	}
	return fmt.Sprintf("interface %s: vdpa device %s has MAC %s, which the guest sees (QEMU gives the guest a vdpa device's own MAC), not the interface's %s: "+
		"set <mac address='%s'/> in the domain, or use a management device that takes a MAC", iface, it.Name, dm, it.MAC, dm)
}

func macString(it Interface) string {
	if it.MAC == nil {
		return ""
	}
	return it.MAC.String()
}

// publishVDPA is hostnic.Publish (a test stops the hook right after it).
var publishVDPA = hostnic.Publish

// startedLockWait bounds how long started waits for the domain's lock:
// started only marks a record, and libvirt stops the domain when the
// hook fails or hangs, so it gives up early instead.
const startedLockWait = 2 * time.Second

// Started marks the domain's record started. It is best-effort and never
// fails (libvirt stops a domain whose started hook fails): it reads
// neither the config nor the XML, waits at most startedLockWait for the
// domain's lock, and turns anything that goes wrong into a note. A domain
// netctl prepared nothing for has no record and needs none.
func (h *Hook) Started(ctx context.Context, domain string) *Result {
	res := &Result{Domain: domain, Op: "started"}
	note := func(format string, a ...any) *Result {
		n := fmt.Sprintf(format, a...) + ": not recorded as started; the domain runs (libvirt stops a domain whose started hook fails)"
		h.logf("%s started: %s", clip(domain), n)
		res.Notes = append(res.Notes, n)
		return res
	}
	if state.CheckDomainName(domain) != nil || h.Store == nil || !h.mayHaveRecord(domain) {
		return res
	}
	lctx, cancel := context.WithTimeout(ctx, startedLockWait)
	defer cancel()
	l, err := h.lock(lctx, domain)
	if err != nil {
		return note("%v", err)
	}
	defer l.Unlock()
	rec, err := h.loadDomain(domain)
	if errors.Is(err, state.ErrNotFound) {
		return res
	}
	if err != nil {
		return note("%v", err)
	}
	rec.Status, rec.Updated = state.DomainStarted, h.now().UTC()
	if err := h.Store.SaveDomain(rec); err != nil {
		return note("%v", err)
	}
	res.Done = append(res.Done, "recorded as started")
	h.logf("%s started: recorded", clip(domain))
	return res
}

// mayHaveRecord says, without the lock, whether domain may have a
// record: false when there is none, and when the record under its key is
// another domain's (libvirt allows a name such as "x-" and 32 hex digits,
// the key state.VMKey gives another name), so that a domain netctl
// prepared nothing for never waits for, or fails on, another's record.
func (h *Hook) mayHaveRecord(domain string) bool {
	rec, err := h.Store.LoadDomain(domain)
	if errors.Is(err, state.ErrNotFound) {
		return false
	}
	if err == nil && rec.Name != domain {
		h.logf("%s: the record under its key is domain %s's: not this domain's, left alone", clip(domain), clip(rec.Name))
		return false
	}
	return true
}

// loadDomain loads the record of domain and checks it is that domain's.
func (h *Hook) loadDomain(domain string) (*state.Domain, error) {
	rec, err := h.Store.LoadDomain(domain)
	if err != nil {
		return nil, err
	}
	if rec.Name != domain {
		return nil, fmt.Errorf("the record for domain %q is domain %q's: left alone: %w", clip(domain), clip(rec.Name), errs.ErrConflict)
	}
	return rec, nil
}

// Reconnect rebuilds the domain's record after libvirtd restarted,
// touching no device: a kept record is marked started; without one, the
// taps the plan names that carry the hook's marker (TapAlias) and the
// published vdpa devices it names are recorded as netctl's. A tap without
// the marker (made by hand while the hook was not installed) is not
// recorded, so the release leaves it. A failure here makes libvirt kill the
// domain, so Reconnect fails only when it cannot write the record.
func (h *Hook) Reconnect(ctx context.Context, p *Plan) (*Result, error) {
	res := &Result{Domain: p.Domain, Op: "reconnect"}
	if len(p.Interfaces) == 0 {
		return res, nil
	}
	l, err := h.lock(ctx, p.Domain)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	rec, err := h.Store.LoadDomain(p.Domain)
	if err != nil {
		if !errors.Is(err, state.ErrNotFound) {
			h.logf("%s reconnect: %v; rebuilding the record", p.Domain, err)
		}
		ns, _ := state.NetNS()
		rec = &state.Domain{Schema: state.DomainSchema, Name: p.Domain, UUID: p.UUID, NetNS: ns, Prepared: h.now().UTC()}
		for _, it := range p.Interfaces {
			switch it.Kind {
			case KindTap:
				if ix := h.Devices.MarkedTapIndex(it.Name); ix != 0 && !h.attachedHolds(p.UUID, it.Name, ix) {
					rec.Taps = append(rec.Taps, state.HookTap{Link: state.Link{Name: it.Name, Ifindex: ix, Created: true},
						MAC: macString(it), Queues: max(it.Queues, 1), Owner: p.Owner, MTU: it.MTU})
				}
			case KindVDPA:
				if t, err := os.Readlink(it.Link); err == nil {
					id, _ := h.Devices.VDPAIdentity(it.Name) // 0 (gone): the name decides at release
					rec.VDPAs = append(rec.VDPAs, state.HookVDPA{VDPA: state.VDPA{Name: it.Name, Mgmtdev: it.Mgmtdev, Vhost: t, Created: true},
						MAC: macString(it), Link: it.Link, SysfsIno: id})
				}
			}
		}
		res.Done = append(res.Done, fmt.Sprintf("rebuilt the record: %d tap(s), %d vdpa device(s)", len(rec.Taps), len(rec.VDPAs)))
	} else {
		res.Done = append(res.Done, "kept the record")
	}
	rec.Status, rec.Updated = state.DomainStarted, h.now().UTC()
	if err := h.Store.SaveDomain(rec); err != nil {
		return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	h.logf("%s reconnect: %v", p.Domain, res.Done)
	return res, nil
}

// Release deletes what the domain's record says netctl created, then the
// record. Without a record it does nothing: a second release, or a
// release of a domain netctl prepared nothing for, succeeds.
func (h *Hook) Release(ctx context.Context, domain string) (*Result, error) {
	res := &Result{Domain: domain, Op: "release"}
	if state.CheckDomainName(domain) != nil {
		return res, nil // no record can have this name
	}
	if h.Store == nil {
		// libvirt only logs a failed release; the note says it all.
		n := fmt.Sprintf("netctl's records: %v: nothing released", h.StoreErr)
		h.logf("%s release: %s", clip(domain), n)
		res.Notes = append(res.Notes, n)
		return res, nil
	}
	if !h.mayHaveRecord(domain) {
		h.logf("%s release: nothing recorded", clip(domain))
		return res, nil // nothing recorded: no lock taken
	}
	l, err := h.lock(ctx, domain)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	rec, err := h.loadDomain(domain)
	if errors.Is(err, state.ErrNotFound) {
		h.logf("%s release: nothing recorded", clip(domain))
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", domain, err)
	}
	if err := h.release(ctx, rec, res); err != nil {
		return nil, fmt.Errorf("domain %s: %w", domain, err)
	}
	return res, nil
}

// release deletes rec's devices; what it could not delete stays in the
// record (saved) so that the next release tries again.
func (h *Hook) release(ctx context.Context, rec *state.Domain, res *Result) error {
	var errsSeen []error
	if ns, err := state.NetNS(); err == nil && rec.NetNS != 0 && ns != rec.NetNS && len(rec.Taps) > 0 {
		return fmt.Errorf("the taps were made in network namespace %d, this is %d: run the release there", rec.NetNS, ns)
	}
	var keepTaps []state.HookTap
	for _, t := range rec.Taps {
		if !t.Created {
			continue
		}
		if t.Ifindex == 0 {
			// An intent: the hook stopped between the record and the
			// create, or between the create and the next save.
			ix, why := h.pendingTap(rec.Name, t.Name)
			if ix == 0 {
				res.Notes = append(res.Notes, "tap "+t.Name+" was to be made and "+why)
				continue
			}
			t.Ifindex = ix
		}
		deleted, err := h.Devices.DeleteTap(t.Name, t.Ifindex)
		if err != nil {
			errsSeen = append(errsSeen, err)
			keepTaps = append(keepTaps, t)
			continue
		}
		if !deleted {
			res.Notes = append(res.Notes, fmt.Sprintf("tap %s is gone, or is not the tap netctl made (not ifindex %d, or without netctl's mark, alias %q): left alone", t.Name, t.Ifindex, TapAlias))
			continue
		}
		res.Done = append(res.Done, "deleted tap "+t.Name)
	}
	var keepVDPA []state.HookVDPA
	for _, v := range rec.VDPAs {
		if v.Link != "" {
			if err := hostnic.Unpublish(v.Link, v.Vhost); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		if !v.Created {
			continue
		}
		if v.Vhost == "" && v.SysfsIno == 0 {
			// An intent: the hook stopped between the record and the
			// create, or between the create and the next save.
			if why := h.pendingVDPA(rec.Name, v.Name); why != "" {
				res.Notes = append(res.Notes, "vdpa "+v.Name+" was to be made and "+why)
				continue
			}
		} else if v.SysfsIno != 0 {
			id, err := h.Devices.VDPAIdentity(v.Name)
			switch {
			case errors.Is(err, os.ErrNotExist):
				res.Notes = append(res.Notes, "vdpa "+v.Name+" was already gone")
				continue
			case err != nil:
				errsSeen = append(errsSeen, err)
				keepVDPA = append(keepVDPA, v)
				continue
			case id != v.SysfsIno:
				res.Notes = append(res.Notes, "vdpa "+v.Name+" is not the device netctl created (it was deleted and added again since): left alone")
				continue
			}
		}
		if err := h.Devices.DeleteVDPA(ctx, v.Name); err != nil {
			errsSeen = append(errsSeen, err)
			keepVDPA = append(keepVDPA, v)
			continue
		}
		res.Done = append(res.Done, "deleted vdpa "+v.Name)
	}
	for _, d := range append(slices.Clone(res.Done), res.Notes...) {
		h.logf("%s release: %s", rec.Name, d)
	}
	if len(errsSeen) > 0 {
		rec.Taps, rec.VDPAs, rec.Updated = keepTaps, keepVDPA, h.now().UTC()
		if err := h.Store.SaveDomain(rec); err != nil {
			errsSeen = append(errsSeen, err)
		}
		err := errors.Join(errsSeen...)
		h.logf("%s release: %v", rec.Name, err)
		return fmt.Errorf("%w (what was not deleted stays recorded; run the release again: netctl hook qemu --run-dir %s -- %s release end -)", err, shQuote(h.Store.Dir), shQuote(oneLine(rec.Name)))
	}
	return h.Store.RemoveDomain(rec.Name)
}

// pendingVDPA says why vdpa device name, which domain's record meant to
// make but did not record as made, is left alone: there is none, or
// another domain's record holds it or means to make it; "" when release
// deletes it. (A vdpa device carries no mark like a tap's alias: its
// name, which the domain's XML names under netctl's vdpa directory,
// stands for it.)
func (h *Hook) pendingVDPA(domain, name string) string {
	if _, err := h.Devices.VDPAIdentity(name); err != nil {
		return "there is no vdpa device by that name: nothing to delete"
	}
	ds, _, err := h.Store.ListDomains()
	if err != nil {
		return fmt.Sprintf("the other records could not be read (%v): left alone", err)
	}
	for _, d := range ds {
		if d.Name == domain {
			continue
		}
		for _, v := range d.VDPAs {
			if v.Name == name {
				return fmt.Sprintf("the vdpa device by that name now is domain %s's, or is being made for it: left alone", clip(d.Name))
			}
		}
	}
	return ""
}

// shQuote quotes s for sh (for a command the user is told to run).
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pendingTap is the ifindex of tap name that domain's record meant to
// make but did not record as made: the tap must carry the hook's marker
// and no other domain's record may hold it or mean to make it; else 0
// and why it is left.
func (h *Hook) pendingTap(domain, name string) (int, string) {
	ix := h.Devices.MarkedTapIndex(name)
	if ix == 0 {
		return 0, "there is no tap by that name that netctl made: nothing to delete"
	}
	ds, _, err := h.Store.ListDomains()
	if err != nil {
		return 0, fmt.Sprintf("the other records could not be read (%v): left alone", err)
	}
	for _, d := range ds {
		if d.Name == domain {
			continue
		}
		for _, t := range d.Taps {
			// Ifindex 0: the other domain means to make a tap by that
			// name, and may be making it now (its lock is not ours): the
			// tap may be its; if that domain died too, its own release
			// finds the tap once this record is gone.
			if t.Name == name && (t.Ifindex == ix || t.Ifindex == 0) {
				return 0, fmt.Sprintf("the tap by that name now is domain %s's, or is being made for it: left alone", clip(d.Name))
			}
		}
	}
	return ix, ""
}

// ownerText says who owns a tap the hook made.
func ownerText(owner int) string {
	if owner == NoOwner {
		return "no owner: root only"
	}
	return fmt.Sprintf("owner %d", owner)
}

// Status lists the hook records (of one domain when name is not "").
func (h *Hook) Status(name string) ([]*state.Domain, []error, error) {
	if name != "" {
		d, err := h.Store.LoadDomain(name)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return []*state.Domain{d}, nil, nil
	}
	return h.Store.ListDomains()
}
