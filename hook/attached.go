package hook

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/state"
)

// attachedLockWait bounds how long release waits for the lock of a
// domain's live-attached NICs. An attach or detach that holds it may be
// waiting for libvirt, which waits for this hook (libvirt runs the
// release with the domain locked): the hook gives up first, and that
// attach then fails on the stopped domain and undoes itself.
const attachedLockWait = 3 * time.Second

// domainUUID is the <uuid> of the root <domain> in the XML r holds
// (read up to MaxXML bytes, stopping at the uuid), canonical lower case;
// "" when there is none or it is not a UUID.
func domainUUID(r io.Reader) string {
	if r == nil {
		return ""
	}
	dec := xml.NewDecoder(io.LimitReader(r, MaxXML))
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 && t.Name.Local != "domain" {
				return ""
			}
			if depth == 2 && t.Name.Local == "uuid" {
				var s struct {
					Text string `xml:",chardata"`
				}
				if dec.DecodeElement(&s, &t) != nil || len(s.Text) > 64 {
					return ""
				}
				u := strings.ToLower(strings.TrimSpace(s.Text))
				if !state.IsUUID(u) {
					return ""
				}
				return u
			}
			if depth == 2 {
				if dec.Skip() != nil {
					return ""
				}
				depth--
			}
		case xml.EndElement:
			depth--
		}
	}
}

// releaseAttached deletes what netctl attach --vm made for the stopped
// libvirt domain uuid (its records in this run dir, keyed
// state.LibvirtKey(uuid)): each tap only while it carries netctl's mark
// and the recorded ifindex (hostnic's DeleteTap), each vdpa device only
// while it is the one netctl created (hostnic.DeleteRecordedVDPA), then
// the record. It is
// best-effort: it never fails (libvirt only logs a failed release, and
// the domain is gone either way), says what it did and did not in res,
// and never calls libvirt. A NIC also added to the persistent definition
// (Libvirt.Persistent) goes the same way: its interface stays in the
// definition, and the next start's prepare makes its tap again (the
// interface carries netctl's alias, ua-netctl-ID).
func (h *Hook) releaseAttached(ctx context.Context, domain, uuid string, res *Result) {
	if uuid == "" || h.Store == nil {
		return
	}
	key := state.LibvirtKey(uuid)
	say := func(done bool, format string, a ...any) {
		s := fmt.Sprintf(format, a...)
		h.logf("%s release: %s", clip(domain), s)
		if done {
			res.Done = append(res.Done, s)
		} else {
			res.Notes = append(res.Notes, s)
		}
	}
	mine := func() ([]*state.NIC, error) {
		nics, _, err := h.Store.List(key)
		if err != nil {
			return nil, err
		}
		var out []*state.NIC
		for _, n := range nics {
			if n.Libvirt != nil && n.Libvirt.UUID == uuid {
				out = append(out, n)
			}
		}
		return out, nil
	}
	nics, err := mine()
	if err != nil {
		say(false, "netctl attach's records: %v: none released", err)
		return
	}
	if len(nics) == 0 {
		return // no lock taken: nothing to wait for
	}
	// Each NIC under its own lock (state.LibvirtLockKey), all within
	// attachedLockWait: an attach of another NIC in flight holds only its
	// own, and may be waiting in libvirt for the domain's job that runs
	// this release.
	lctx, cancel := context.WithTimeout(ctx, attachedLockWait)
	defer cancel()
	ns, nsErr := state.NetNS()
	for _, n := range nics {
		lkey := state.LibvirtLockKey(uuid, n.ID)
		l, err := h.Store.Lock(lctx, lkey)
		if err != nil {
			say(false, "another netctl attach or detach of NIC %s on domain %s holds its lock (%v): left to it; what stays, netctl detach --vm %s --id %s removes",
				n.ID, uuid, err, uuid, n.ID)
			continue
		}
		h.releaseAttachedNIC(ctx, key, uuid, n.ID, ns, nsErr, say)
		l.Unlock()
		h.Store.RemoveLock(lkey, false) // unless taken meanwhile (safe against a Lock)
	}
}

// releaseAttachedNIC deletes NIC id's tap and record (its lock held),
// reading the record again under the lock.
func (h *Hook) releaseAttachedNIC(ctx context.Context, key, uuid, id string, ns uint64, nsErr error, say func(bool, string, ...any)) bool {
	cur, err := h.Store.Load(key, id)
	if errors.Is(err, state.ErrNotFound) {
		return false // detached meanwhile
	}
	if err != nil {
		say(false, "NIC %s: its record: %v: left", id, err)
		return false
	}
	for _, n := range []*state.NIC{cur} {
		if n.Tap != nil && n.Tap.Created {
			if nsErr == nil && n.NetNS != 0 && n.NetNS != ns {
				say(false, "NIC %s: its tap %s was made in network namespace %d, this is %d: left, with its record (netctl detach --vm %s --id %s there removes it)",
					n.ID, n.Tap.Name, n.NetNS, ns, uuid, n.ID)
				continue
			}
			deleted, err := h.Devices.DeleteTap(n.Tap.Name, n.Tap.Ifindex)
			if err != nil {
				say(false, "NIC %s: tap %s: %v: its record stays (netctl detach --vm %s --id %s tries again)", n.ID, n.Tap.Name, err, uuid, n.ID)
				continue
			}
			if deleted {
				say(true, "deleted tap %s of NIC %s (netctl attach)", n.Tap.Name, n.ID)
			} else {
				say(false, "tap %s of NIC %s is gone, or is not the tap netctl made (not ifindex %d, or without netctl's mark): left alone", n.Tap.Name, n.ID, n.Tap.Ifindex)
			}
		}
		if n.VDPA != nil && n.VDPA.Created {
			// QEMU is gone, so nothing holds the device: delete it as
			// detach would, only while it is the device netctl made.
			deleted, err := hostnic.DeleteRecordedVDPA(ctx, h.Devices, n.VDPA)
			if err != nil {
				say(false, "NIC %s: vdpa device %s: %v: its record stays (netctl detach --vm %s --id %s tries again)", n.ID, n.VDPA.Name, err, uuid, n.ID)
				continue
			}
			if deleted {
				say(true, "deleted vdpa device %s of NIC %s (netctl attach)", n.VDPA.Name, n.ID)
			} else {
				say(false, "vdpa device %s of NIC %s is gone, or is not the device netctl made (another identity, or not named by netctl): left alone", n.VDPA.Name, n.ID)
			}
		}
		if err := h.Store.Remove(key, n.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
			say(false, "NIC %s: removing its record: %v", n.ID, err)
			continue
		}
		what := "removed the record of NIC %s (netctl attach)"
		if n.Libvirt.Persistent {
			what += "; its interface stays in the persistent definition, and the next start's prepare makes its tap again"
		}
		say(true, what, n.ID)
	}
	return true
}

// attachedHolds says whether a record of netctl attach on domain uuid
// holds tap name with ifindex: such a tap is that record's, never the
// hook's (a reconnect does not take it).
func (h *Hook) attachedHolds(uuid, name string, ifindex int) bool {
	uuid = strings.ToLower(uuid)
	if !state.IsUUID(uuid) {
		return false
	}
	nics, _, err := h.Store.List(state.LibvirtKey(uuid))
	if err != nil {
		return true // cannot tell: leave it to the record
	}
	for _, n := range nics {
		if n.Libvirt != nil && n.Libvirt.UUID == uuid && n.Tap != nil && n.Tap.Name == name && n.Tap.Ifindex == ifindex {
			return true
		}
	}
	return false
}
