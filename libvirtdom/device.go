package libvirtdom

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"libvirt.org/go/libvirtxml"

	"github.com/netctl/netctl/internal/errs"
)

// ErrPending is returned by Removal.Wait when the deadline passed before
// libvirt reported the device removed: the guest has not released it
// yet (libvirt removes it when the guest does, or at the guest's next
// reset), so nothing the device used may be deleted yet.
var ErrPending = errors.New("device removal still pending: the guest has not released it yet")

// Modify says where a hotplug applies: to the running domain (Live, virsh
// --live), to its persistent definition (Config, virsh --config), or both.
type Modify uint32

const (
	Live   Modify = 1 // VIR_DOMAIN_AFFECT_LIVE
	Config Modify = 2 // VIR_DOMAIN_AFFECT_CONFIG
)

func (m Modify) String() string {
	var s []string
	if m&Live != 0 {
		s = append(s, "live")
	}
	if m&Config != 0 {
		s = append(s, "config")
	}
	if len(s) == 0 {
		return "current"
	}
	return strings.Join(s, "|")
}

// Attach hotplugs the device xml (virDomainAttachDeviceFlags, like virsh
// attach-device with --live and/or --config). libvirt's refusal (no free
// PCI slot, a MAC in use) comes back with its message.
func (c *Conn) Attach(ctx context.Context, d Domain, xml string, m Modify) error {
	return c.do(ctx, fmt.Sprintf("attach a device to %s (%s)", d.Name, m), func() error {
		return c.l.DomainAttachDeviceFlags(d.d, xml, m)
	})
}

// Detach asks libvirt to unplug the device xml (virDomainDetachDeviceFlags,
// like virsh detach-device). With Live, libvirt asks the guest and waits
// a few seconds; the device may still be there when it returns: register
// WatchRemoved before the call and Wait for the alias after it.
func (c *Conn) Detach(ctx context.Context, d Domain, xml string, m Modify) error {
	return c.do(ctx, fmt.Sprintf("detach a device from %s (%s)", d.Name, m), func() error {
		return c.l.DomainDetachDeviceFlags(d.d, xml, m)
	})
}

// Removal follows libvirt's device-removed and device-removal-failed
// events of one domain. It is safe for concurrent use.
type Removal struct {
	cancel  context.CancelFunc
	mu      sync.Mutex // guards removed, failed, changed
	removed map[string]bool
	failed  map[string]bool
	changed chan struct{} // closed and replaced at each event
	done    sync.WaitGroup
}

// WatchRemoved registers for the domain's device-removed and
// device-removal-failed events (virConnectDomainEventCallbackRegisterAny
// with VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED and _DEVICE_REMOVAL_FAILED).
// Register before Detach, so an event that comes while Detach runs is not
// missed; Close deregisters.
func (c *Conn) WatchRemoved(ctx context.Context, d Domain) (*Removal, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Removal{cancel: cancel, removed: map[string]bool{}, failed: map[string]bool{}, changed: make(chan struct{})}
	for _, failed := range []bool{false, true} {
		var ch <-chan DeviceEvent
		err := c.do(ctx, "register for device events of "+d.Name, func() (err error) {
			ch, err = c.l.SubscribeDeviceRemoval(wctx, d.d, failed)
			return
		})
		if err != nil {
			r.Close()
			return nil, err
		}
		r.done.Add(1)
		go r.follow(ch)
	}
	return r, nil
}

func (r *Removal) follow(ch <-chan DeviceEvent) {
	defer r.done.Done()
	for ev := range ch {
		r.mu.Lock()
		if ev.Failed {
			r.failed[ev.Alias] = true
		} else {
			r.removed[ev.Alias] = true
		}
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
}

// Wait waits until libvirt reports the device with alias (libvirt's
// <alias name>, e.g. "net1") removed. When ctx ends first it returns an
// error wrapping ErrPending; when the guest refused the removal
// (device-removal-failed), one wrapping errs.ErrBusy.
func (r *Removal) Wait(ctx context.Context, alias string) error {
	for {
		r.mu.Lock()
		removed, failed, ch := r.removed[alias], r.failed[alias], r.changed
		r.mu.Unlock()
		switch {
		case removed:
			return nil
		case failed:
			return fmt.Errorf("device %s: the guest refused its removal (libvirt's device-removal-failed event): %w", clip(alias), errs.ErrBusy)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("device %s: %w (%w)", clip(alias), ErrPending, ctx.Err())
		}
	}
}

// Close deregisters the events; it is idempotent.
func (r *Removal) Close() {
	r.cancel()
	r.done.Wait()
}

// InterfaceByMAC is the domain's interface with mac, or nil.
func InterfaceByMAC(d *libvirtxml.Domain, mac net.HardwareAddr) *libvirtxml.DomainInterface {
	if d == nil || d.Devices == nil || mac == nil {
		return nil
	}
	for i := range d.Devices.Interfaces {
		x := &d.Devices.Interfaces[i]
		if x.MAC == nil {
			continue
		}
		if m, err := net.ParseMAC(x.MAC.Address); err == nil && m.String() == mac.String() {
			return x
		}
	}
	return nil
}

// Alias is an interface's libvirt alias (from the live XML), or "".
func Alias(x *libvirtxml.DomainInterface) string {
	if x == nil || x.Alias == nil {
		return ""
	}
	return x.Alias.Name
}
