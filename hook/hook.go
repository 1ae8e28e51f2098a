package hook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/state"
)

// Hook runs the libvirt qemu hook's operations. Not safe for concurrent
// use; two processes serialise per domain through the state lock.
type Hook struct {
	Config  *Config
	Store   *state.Store
	Devices Devices
	// Log receives one line per step (the log file; the CLI adds stderr
	// for failures). Nil discards.
	Log io.Writer
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
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
// is stdin. Operations the hook has nothing to do for succeed at once
// without reading the XML. A reconnect never fails: libvirt kills a
// running domain whose reconnect hook fails, so an XML the hook refuses
// (or a record it cannot write) is logged and noted instead.
func (h *Hook) Run(ctx context.Context, domain, op, subop string, domainXML io.Reader) (*Result, error) {
	res, err := h.run(ctx, domain, op, subop, domainXML)
	if err != nil && op == "reconnect" && subop == "begin" {
		note := fmt.Sprintf("%v: record not rebuilt; the domain keeps running (libvirt kills a domain whose reconnect hook fails)", err)
		h.logf("%s %s", clip(domain), note)
		return &Result{Domain: domain, Op: op, Notes: []string{note}}, nil
	}
	return res, err
}

// RunReconnectWithoutConfig is what the CLI does for a reconnect when
// the host config cannot be loaded (cfgErr): nothing, and a note, since
// failing would make libvirt kill the running domain.
func RunReconnectWithoutConfig(domain string, cfgErr error) *Result {
	return &Result{Domain: domain, Op: "reconnect", Notes: []string{fmt.Sprintf(
		"%v: record not rebuilt; the domain keeps running (libvirt kills a domain whose reconnect hook fails): fix the config", cfgErr)}}
}

func (h *Hook) run(ctx context.Context, domain, op, subop string, domainXML io.Reader) (*Result, error) {
	switch op + " " + subop {
	case "prepare begin", "started begin", "reconnect begin":
	case "release end":
		return h.Release(ctx, domain)
	default:
		return &Result{Domain: domain, Op: op}, nil
	}
	b, err := ReadXML(domainXML)
	if err != nil {
		return nil, err
	}
	p, err := ParsePlan(b, h.Config)
	if err != nil {
		return nil, err
	}
	if p.Domain != domain {
		return nil, fmt.Errorf("the XML on stdin is domain %q, the arguments name %q: %w", clip(p.Domain), clip(domain), errs.ErrInvalid)
	}
	switch op {
	case "prepare":
		return h.Prepare(ctx, p)
	case "started":
		return h.Started(ctx, p)
	default:
		return h.Reconnect(ctx, p)
	}
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
	if old, err := h.Store.LoadDomain(p.Domain); err == nil {
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
		notes, err := h.Devices.DirectNotes(it)
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
	desc, err := h.Devices.Probe(ctx, slices.ContainsFunc(p.Interfaces, func(it Interface) bool { return it.Kind == KindDirect }))
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	decided := func(i int, it Interface, d policy.Decision) {
		h.logf("%s prepare: %s", p.Domain, summary(it, ifaceName(it.MAC, i), d))
		res.Notes = append(res.Notes, fmt.Sprintf("interface %s: backend %s, profile %s", ifaceName(it.MAC, i), d.Backend, firstNonEmpty(it.Profile, policy.Throughput)))
		rec.Interfaces = append(rec.Interfaces, record(it, d))
	}
	for i, it := range p.Interfaces {
		if it.Kind == KindVDPA {
			continue
		}
		d, err := decide(desc, it, nil, ifaceName(it.MAC, i))
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
			ifindex, err := h.Devices.CreateTap(it, p.Owner)
			if err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			undo = append(undo, func() {
				if err := h.Devices.DeleteLink(it.Name, ifindex); err != nil {
					h.logf("%s prepare: undo: %v", p.Domain, err)
				}
			})
			rec.Taps = append(rec.Taps, state.HookTap{Link: state.Link{Name: it.Name, Ifindex: ifindex, Created: true},
				MAC: macString(it), Queues: max(it.Queues, 1), Owner: p.Owner, MTU: it.MTU})
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			d := fmt.Sprintf("created tap %s (ifindex %d, %d queue(s), vnet_hdr, owner %d", it.Name, ifindex, max(it.Queues, 1), p.Owner)
			if it.MTU != 0 {
				d += fmt.Sprintf(", mtu %d", it.MTU)
			}
			res.Done = append(res.Done, d+")")
			h.logf("%s prepare: %s", p.Domain, d+")")
		case KindVDPA:
			if err := h.checkLinkFree(it.Link); err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			vhost, err := h.Devices.CreateVDPA(ctx, it)
			if err != nil {
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
			hv := state.HookVDPA{VDPA: state.VDPA{Name: it.Name, Mgmtdev: it.Mgmtdev, Vhost: vhost, Created: true}, MAC: macString(it), SysfsIno: id}
			rec.VDPAs = append(rec.VDPAs, hv)
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			// Recorded first (a crash from here on leaves a record the
			// next release finds), then decided by its own features.
			dev, err := h.Devices.DescribeVDPA(ctx, it.Name)
			if err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			dec, err := decide(desc, it, &dev, ifaceName(it.MAC, i))
			if err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			decided(i, it, dec)
			if err := publish(it.Link, vhost); err != nil {
				return nil, fmt.Errorf("domain %s: interface %s: %w", p.Domain, ifaceName(it.MAC, i), err)
			}
			undo = append(undo, func() { unpublish(it.Link, vhost) })
			rec.VDPAs[len(rec.VDPAs)-1].Link = it.Link
			if err := save(); err != nil {
				return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
			}
			d := fmt.Sprintf("created vdpa %s from %s (%s, published as %s)", it.Name, it.Mgmtdev, vhost, it.Link)
			res.Done = append(res.Done, d)
			h.logf("%s prepare: %s", p.Domain, d)
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

func macString(it Interface) string {
	if it.MAC == nil {
		return ""
	}
	return it.MAC.String()
}

// checkLinkFree refuses a published path that exists already (a record
// from an earlier start was released before this is called).
func (h *Hook) checkLinkFree(p string) error {
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("%s exists and netctl did not publish it for this domain: remove it, or name another vdpa device in <source dev>: %w", p, errs.ErrConflict)
	}
	return nil
}

// publish makes link a symlink to vhost, creating its directory.
func publish(link, vhost string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("publish %s: %w", link, err)
	}
	if err := os.Symlink(vhost, link); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("publish %s: it exists and netctl did not make it: remove it: %w", link, errs.ErrConflict)
		}
		return fmt.Errorf("publish %s: %w", link, err)
	}
	return nil
}

// unpublish removes link if it still points at vhost.
func unpublish(link, vhost string) error {
	t, err := os.Readlink(link)
	if err != nil || t != vhost {
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", link, err)
	}
	return nil
}

// Started marks the domain's record started; a domain netctl prepared
// nothing for has none and needs none.
func (h *Hook) Started(ctx context.Context, p *Plan) (*Result, error) {
	res := &Result{Domain: p.Domain, Op: "started"}
	l, err := h.lock(ctx, p.Domain)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	rec, err := h.Store.LoadDomain(p.Domain)
	if errors.Is(err, state.ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	rec.Status, rec.Updated = state.DomainStarted, h.now().UTC()
	if err := h.Store.SaveDomain(rec); err != nil {
		return nil, fmt.Errorf("domain %s: %w", p.Domain, err)
	}
	res.Done = append(res.Done, "recorded as started")
	h.logf("%s started: recorded", p.Domain)
	return res, nil
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
				if ix := h.Devices.HookTapIndex(it.Name); ix != 0 {
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
	if err := state.CheckVMName(domain); err != nil || domain == "" {
		return nil, fmt.Errorf("domain name %.64q: %w", domain, errs.ErrInvalid)
	}
	l, err := h.lock(ctx, domain)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	rec, err := h.Store.LoadDomain(domain)
	if errors.Is(err, state.ErrNotFound) {
		h.logf("%s release: nothing recorded", domain)
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
		if err := h.Devices.DeleteLink(t.Name, t.Ifindex); err != nil {
			errsSeen = append(errsSeen, err)
			keepTaps = append(keepTaps, t)
			continue
		}
		res.Done = append(res.Done, "deleted tap "+t.Name)
	}
	var keepVDPA []state.HookVDPA
	for _, v := range rec.VDPAs {
		if v.Link != "" {
			if err := unpublish(v.Link, v.Vhost); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		if !v.Created {
			continue
		}
		if v.SysfsIno != 0 {
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
		return fmt.Errorf("%w (what was not deleted stays recorded; run the release again: netctl hook qemu %s release end -)", err, rec.Name)
	}
	return h.Store.RemoveDomain(rec.Name)
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
