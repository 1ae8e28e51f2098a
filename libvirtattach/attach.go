package libvirtattach

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/libvirtdom"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/state"
)

// Request is one attach to a libvirt domain.
type Request struct {
	URI    string // libvirt's URI ("" qemu:///system)
	Domain string // by name or UUID
	ID     string // the NIC's id: its libvirt alias is ua-netctl-ID
	// Backend: auto, vdpa, vhost-net or userspace ("" auto). macvtap is
	// not offered through libvirt yet. vdpa is chosen only for a device
	// the request names (VDPA or Mgmtdev).
	Backend string
	// VDPA names an existing vdpa device bound to vhost_vdpa; Mgmtdev a
	// management device netctl creates vdpa device netctl-ID on (deleted
	// again by detach). At most one; either needs Backend vdpa or auto.
	VDPA       string
	Mgmtdev    string
	Queues     int
	MAC        string // "" 52:54:00 and three random bytes
	MTU        int
	Profile    string       // throughput (""), latency or compat
	Pool       *policy.Pool // pin the NIC to a pool's plan (nil: none)
	Persistent bool         // also add the interface to the persistent definition
	StateDir   string       // "" state.DefaultDir

	// For tests: the host (nil hostnic.Real{}) and its probe (nil
	// Host.Probe).
	Host  hostnic.Host
	Probe func(ctx context.Context) (*host.Description, error)
}

// Alias is the libvirt alias of NIC id: libvirt keeps user aliases that
// start with "ua-" as they are given.
func Alias(id string) string { return "ua-netctl-" + id }

// step wraps a step's error with its name.
func step(name string, err error) error { return fmt.Errorf("attach: %s: %w", name, err) }

// Attach gives the running libvirt domain r.Domain a netctl NIC through
// libvirt (see the package doc) and returns its record. On any failure
// every step done is undone, and the error names the step and what to do.
func Attach(ctx context.Context, r Request) (*state.NIC, error) {
	h := r.Host
	if h == nil {
		// The tap's offloads, probed on a scratch tap, are kept per boot
		// in the state dir (as netctl attach does): 15-45 ms an attach.
		h = hostnic.Real{CacheDir: cmp.Or(r.StateDir, state.DefaultDir)}
	}
	if err := state.CheckID(r.ID); err != nil {
		return nil, step("check the request", err)
	}
	switch r.Backend {
	case "", "auto":
		r.Backend = ""
	case policy.BackendVDPA, policy.BackendVhostNet, policy.BackendUserspace:
	default:
		return nil, step("check the request", fmt.Errorf("backend %.32q: use auto, vdpa, vhost-net or userspace: %w", r.Backend, errs.ErrInvalid))
	}
	if err := checkVDPARequest(r); err != nil {
		return nil, step("check the request", err)
	}
	if r.Queues == 0 {
		r.Queues = 1
	}
	if r.Queues < 1 || r.Queues > policy.MaxQueues {
		return nil, step("check the request", fmt.Errorf("%d queues: use 1 to %d: %w", r.Queues, policy.MaxQueues, errs.ErrInvalid))
	}
	mac := hostnic.RandomMAC()
	if r.MAC != "" {
		m, err := net.ParseMAC(r.MAC)
		if err != nil || len(m) != 6 || m[0]&1 != 0 {
			return nil, step("check the request", fmt.Errorf("--mac %.32q: give a unicast Ethernet address such as 52:54:00:12:34:56: %w", r.MAC, errs.ErrInvalid))
		}
		mac = m
	}
	if r.MTU != 0 && (r.MTU < 68 || r.MTU > 65521) {
		return nil, step("check the request", fmt.Errorf("--mtu %d: use 68 to 65521: %w", r.MTU, errs.ErrInvalid))
	}

	c, err := libvirtdom.Dial(ctx, r.URI)
	if err != nil {
		return nil, step("connect to libvirt", err)
	}
	defer c.Close()
	dom, err := c.Lookup(ctx, r.Domain)
	if err != nil {
		return nil, step("find the domain", err)
	}
	if run, err := c.Running(ctx, dom); err != nil {
		return nil, step("find the domain", err)
	} else if !run {
		return nil, step("find the domain", fmt.Errorf("domain %s is not running: start it (virsh start %s); for its next start, "+
			"netctl's hook serves interfaces its metadata names: %w", dom.Name, dom.Name, errs.ErrNotAvailable))
	}
	store, err := state.Open(r.StateDir)
	if err != nil {
		return nil, step("state", err)
	}
	key := state.LibvirtKey(dom.UUID)
	lkey := state.LibvirtLockKey(dom.UUID, r.ID)
	lock, err := store.Lock(ctx, lkey)
	if err != nil {
		return nil, step("lock the NIC", err)
	}
	defer unlock(store, lock, lkey)
	// The MAC's lock too (after the NIC's, always in this order), held
	// across the hotplug: libvirt does not refuse a second interface with
	// a MAC the domain has, so two attaches of one MAC under distinct ids
	// would both pass checkFree. The hook's release never takes it.
	mkey := state.LibvirtLockKey(dom.UUID, "mac="+mac.String())
	mlock, err := store.Lock(ctx, mkey)
	if err != nil {
		return nil, step("lock the MAC", err)
	}
	defer unlock(store, mlock, mkey)

	// Read under the locks: what checkFree sees cannot change under it
	// by another netctl attach.
	live, err := c.XML(ctx, dom, false)
	if err != nil {
		return nil, step("read the domain", err)
	}
	x, err := libvirtdom.ParseDomain(live)
	if err != nil {
		return nil, step("read the domain", err)
	}
	alias := Alias(r.ID)
	if err := checkFree(x, alias, mac, r.ID); err != nil {
		return nil, step("check the domain", err)
	}

	version, err := c.HypervisorVersion(ctx)
	if err != nil {
		return nil, step("ask libvirt for its QEMU's version", err)
	}
	nic := &state.NIC{Schema: state.Schema, VM: dom.Name, ID: r.ID, Netdev: "host" + alias,
		Backend: policy.BackendUserspace, Queues: r.Queues, MAC: mac.String(), MTU: r.MTU, QEMUVersion: version,
		Properties: map[string]string{}, Status: state.StatusAttaching, Attached: time.Now().UTC(),
		Libvirt: &state.Libvirt{URI: c.URI, UUID: dom.UUID, Alias: alias, Persistent: r.Persistent}}
	if len(nic.VM) > state.MaxVMName || state.CheckVMName(nic.VM) != nil {
		nic.VM = "" // the UUID keys the record; a name netctl cannot keep is left out
	}
	if r.VDPA != "" || r.Mgmtdev != "" {
		nic.Backend = policy.BackendVDPA // until the decision
	}
	nic.NetNS, _ = state.NetNS()
	if err := store.Create(nic); err != nil {
		if errors.Is(err, state.ErrExists) {
			err = fmt.Errorf("%w: netctl already has NIC %s on domain %s (netctl list; netctl detach --vm %s --id %s): %w", err, r.ID, dom.Name, dom.UUID, r.ID, errs.ErrConflict)
		}
		return nil, step("record the intent to attach", err)
	}
	var undo []func(context.Context) error
	fail := func(err error) (*state.NIC, error) {
		// The undos run even when ctx is over (a deadline, a signal):
		// on a context of their own.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](uctx); uerr != nil {
				return nil, fmt.Errorf("%w; and rolling back failed, so something may be left (netctl list shows the record): %w", err, uerr)
			}
		}
		if rerr := store.Remove(key, r.ID); rerr != nil {
			return nil, fmt.Errorf("%w; and removing the record failed: %w", err, rerr)
		}
		return nil, err
	}

	// A vdpa device to create must exist to be probed: made first,
	// recorded before it is made, deleted again by the undo (also when
	// the chain decides against it).
	vname, vhost := r.VDPA, ""
	if r.Mgmtdev != "" {
		p, u, err := createVDPA(ctx, r, h, nic, mac, func() error { return store.Save(nic) })
		if u != nil {
			undo = append(undo, u)
		}
		if err != nil {
			return fail(step("create a vdpa device on "+r.Mgmtdev, err))
		}
		vname, vhost = nic.VDPA.Name, p
	}

	dec, err := decide(ctx, r, h, version, vname, x.Type)
	if err != nil {
		return fail(err)
	}
	if err := hotplugKeepsPlan(dec, x, r.Pool); err != nil {
		return fail(step("pin the plan", err))
	}
	nic.Backend, nic.Features, nic.BusyPollUS = dec.Backend, dec.OfferNames, dec.BusyPollUS
	nic.Pool = r.Pool.String()
	for _, s := range dec.Steps {
		nic.Steps = append(nic.Steps, state.Step{Backend: s.Backend, Chosen: s.Chosen, Reason: s.Reason})
	}
	for k, v := range dec.QEMU {
		nic.Properties[k] = v
	}

	n := libvirtdom.NIC{MAC: mac, MTU: r.MTU, Queues: r.Queues}
	switch {
	case dec.Backend == policy.BackendVDPA:
		if r.VDPA != "" {
			if vhost, err = existingVDPA(r.VDPA); err != nil {
				return fail(step("find vdpa device "+r.VDPA, err))
			}
			nic.VDPA = &state.VDPA{Name: r.VDPA, Vhost: vhost}
		}
		n.VDPA = vhost
		// The guest sees the device's own MAC (QEMU takes a vdpa
		// peer's over the interface's): the interface must say it.
		adopted, unlockMAC, err := deviceMAC(ctx, c, dom, h, store, r, nic.VDPA.Name, alias, mac)
		if err != nil {
			return fail(step("check vdpa device "+nic.VDPA.Name+"'s MAC", err))
		}
		defer unlockMAC()
		mac, n.MAC, nic.MAC = adopted, adopted, adopted.String()
	default:
		if r.Mgmtdev != "" {
			// Created for nothing: delete it now (its undo is the last).
			if err := undo[len(undo)-1](ctx); err != nil {
				return fail(step("delete the unused vdpa device", err))
			}
			undo, nic.VDPA = undo[:len(undo)-1], nil
		}
		// With --persistent the definition names the tap, which the
		// hook makes again at the next start: a name of its own (see
		// PersistentTapName).
		template := hostnic.TapTemplate
		if r.Persistent {
			template = PersistentTapName(dom.UUID, r.ID)
		}
		if n.Tap, err = createTap(r, h, nic, &undo, template); err != nil {
			return fail(err)
		}
	}
	if err := store.Save(nic); err != nil {
		return fail(step("record the host side", err))
	}

	ixml, unexpressed, err := interfaceXML(n, dec, alias)
	if err != nil {
		return fail(step("write the interface", err))
	}
	for _, u := range unexpressed {
		nic.Note = strings.TrimPrefix(nic.Note+"; "+u, "; ")
	}
	m := libvirtdom.Live
	if r.Persistent {
		m |= libvirtdom.Config
	}
	if err := c.Attach(ctx, dom, ixml, m); err != nil {
		if libvirtdom.Answered(err) {
			return fail(step("hotplug through libvirt (nothing of it is left)", refused(err, x, dom.Name)))
		}
		// No answer (a deadline, a signal, the connection lost): libvirt
		// may have plugged the NIC in, or may still. Deleting the tap
		// would leave the domain an interface on a deleted tap that no
		// record names: the tap and the record stay, for detach (or the
		// hook's release at the domain's stop) to remove.
		nic.Note = strings.TrimPrefix(nic.Note+"; libvirt did not answer the hotplug: it may or may not be in the domain", "; ")
		if serr := store.Save(nic); serr != nil {
			err = fmt.Errorf("%w; and saving the record failed: %w", err, serr)
		}
		return nil, step("hotplug through libvirt: no answer, so netctl cannot tell whether libvirt plugged the NIC in; its tap and record stay: "+
			"netctl detach --vm "+dom.UUID+" --id "+r.ID+" removes them (and the NIC, if it is in)", err)
	}
	nic.Status = state.StatusAttached
	if err := store.Save(nic); err != nil {
		// The NIC is in the domain: keep going, say so.
		return nic, step("record the attached NIC (it is attached: netctl detach --vm "+dom.UUID+" --id "+r.ID+" removes it)", err)
	}
	return nic, nil
}

// checkFree refuses an id, alias or MAC the domain already uses, before
// anything is made (libvirt would refuse a MAC in use only after the tap
// exists).
func checkFree(x *libvirtxml.Domain, alias string, mac net.HardwareAddr, id string) error {
	if x.Devices == nil {
		return nil
	}
	for _, it := range x.Devices.Interfaces {
		if libvirtdom.Alias(&it) == alias {
			return fmt.Errorf("the domain already has an interface with alias %s (netctl NIC %s): pick another --id: %w", alias, id, errs.ErrConflict)
		}
		if it.MAC != nil {
			if m, err := net.ParseMAC(it.MAC.Address); err == nil && m.String() == mac.String() {
				return fmt.Errorf("the domain already has an interface with MAC %s: give another --mac: %w", mac, errs.ErrConflict)
			}
		}
	}
	return nil
}

// createTap makes the persistent multiqueue tap nctlN for nic (nic.Tap)
// and pushes its undo. Its name is the kernel's choice, known only once
// made, so the record names the template first: a kill in between
// leaves a marked tap the record cannot name, which the hook's and gc's
// rules never take for anyone's (no record holds it).
func createTap(r Request, h hostnic.Host, nic *state.NIC, undo *[]func(context.Context) error, template string) (string, error) {
	ifindex, err := h.CreateTap(hostnic.PersistentTap{Name: template, Queues: r.Queues, MTU: r.MTU, Owner: hostnic.NoOwner})
	if err != nil {
		return "", step("create the tap", err)
	}
	tapName, err := hostnic.LinkName(ifindex)
	if err != nil {
		_, derr := h.DeleteTap(template, ifindex)
		return "", step("create the tap", errors.Join(err, derr))
	}
	*undo = append(*undo, func(context.Context) error {
		_, err := h.DeleteTap(tapName, ifindex)
		return err
	})
	nic.Tap = &state.Link{Name: tapName, Ifindex: ifindex, Created: true}
	return tapName, nil
}

// interfaceXML is the <interface> libvirt gets: libvirtdom.NIC's, with
// netctl's alias.
func interfaceXML(n libvirtdom.NIC, dec policy.Decision, alias string) (string, []string, error) {
	x, unexpressed, err := n.Interface(dec)
	if err != nil {
		return "", nil, err
	}
	x.Alias = &libvirtxml.DomainAlias{Name: alias}
	s, err := x.Marshal()
	if err != nil {
		return "", nil, fmt.Errorf("interface XML: %w", err)
	}
	return s, unexpressed, nil
}

// decide probes the host and asks policy.Decide for libvirt's QEMU
// version, as netctl attach does for a hand-run QEMU. The only vdpa
// device offered is vdpa, the one the request names (none for "").
// vhost-net is offered only to a domain of type 'kvm' (domType):
// libvirt opens /dev/vhost-net for no other (qemuInterfaceOpenVhostNet),
// whatever <driver name='vhost'> says, so QEMU would run its userspace
// virtio-net under a record saying vhost-net.
func decide(ctx context.Context, r Request, h hostnic.Host, version, vdpa, domType string) (policy.Decision, error) {
	probe := r.Probe
	if probe == nil {
		probe = func(ctx context.Context) (*host.Description, error) { return h.Probe(ctx, hostnic.ProbeSpec{}) }
	}
	desc, err := probe(ctx)
	if err != nil {
		return policy.Decision{}, step("probe the host", err)
	}
	d := *desc
	d.QEMU.Version, d.QEMU.Error = version, ""
	restrictVDPA(&d, vdpa)
	d.ForLibvirtDomain(domType)
	dec, err := policy.Decide(&d, policy.Request{Backend: r.Backend, Queues: r.Queues, Profile: r.Profile, QEMU: version, Pool: r.Pool})
	if err != nil {
		return policy.Decision{}, step("choose the backend", err)
	}
	return dec, nil
}

// unlock drops lock l of key and removes its file unless someone took it
// meanwhile (state.RemoveLock, safe against a concurrent Lock): a lock
// file per NIC id and per MAC would otherwise stay until netctl gc.
func unlock(store *state.Store, l *state.Lock, key string) {
	l.Unlock()
	store.RemoveLock(key, false)
}
