package stats

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netctl/netctl/qemuproc"
)

// Whose ring counts are whose.
//
// A NIC's ring counts belong to its VM when the VM has a UUID (QMP
// query-uuid, a libvirt domain's UUID; QEMU's default, all zero, is
// none): they are kept under (UUID, NIC id), not under one QEMU
// process, so that another QEMU process of the same VM that takes the
// NIC over (a migration's destination on this host, under another -name
// as netctl migrate incoming needs there, the VM restarted, a saved VM
// restored) goes on with them instead of starting from 0:
//
//   - A QEMU under another -name while the one counting them still runs,
//     that never counted them and was not started with -incoming, is a
//     clone of the VM (same UUID): it counts its own rings under its own
//     key for its life (cloneOf); the two never share or take counts.
//
//   - The new QEMU takes them over once its guest's driver has the
//     device running (DRIVER_OK) and its rings are found; until then (an
//     incoming migration still loading) the QEMU that had them goes on
//     counting. An older QEMU of the VM (a migration's source, paused
//     after the switchover) never takes them back while the newer one
//     runs: its rings say which QEMU counts them now.
//   - Continuation: the new QEMU was started to receive a migration
//     (-incoming on its command line: its guest's state, the rings and
//     their indices, came from the other QEMU) and a queue's rings are at
//     the same guest-physical addresses as the ones last read: that
//     queue counts on from the indices last read from the old QEMU, so
//     what happened between that read and the switchover is counted once,
//     in the first step (a step of more than half a turn is not counted:
//     one uncounted step, as within one QEMU).
//   - Otherwise (a QEMU that booted the guest itself, rings elsewhere,
//     or a reset seen on the old QEMU): a reset, as within one QEMU: the
//     counts carried over, the new rings counted from 0.
//   - Forget (the NIC no longer listed) keeps a VM's counts for
//     Options.KeepFor, for a QEMU of the same VM to go on with; the
//     sampler leaves them alone meanwhile.
//
// Without a UUID a NIC's counts are its QEMU process's (Target.Key): a
// new process starts from 0.

// nilUUID is QEMU's UUID when it was given none: no identity.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// DefaultKeepFor is Options.KeepFor's default.
const DefaultKeepFor = 10 * time.Minute

// maxUUIDs bounds the cache of QEMU processes' UUIDs (entries of exited
// QEMUs are dropped when it is reached).
const maxUUIDs = 1024

// canonicalUUID is s in lower case when it is a UUID in the canonical
// 8-4-4-4-12 hex form and not the nil UUID; "" otherwise.
func canonicalUUID(s string) string {
	if len(s) != 36 {
		return ""
	}
	s = strings.ToLower(s)
	for i, ch := range s {
		switch i {
		case 8, 13, 18, 23:
			if ch != '-' {
				return ""
			}
		default:
			if (ch < '0' || ch > '9') && (ch < 'a' || ch > 'f') {
				return ""
			}
		}
	}
	if s == nilUUID {
		return ""
	}
	return s
}

// parseQueryUUID decodes a query-uuid reply ({"UUID": "..."}, QEMU's
// qapi UuidInfo): "" for QEMU's default, the nil UUID.
func parseQueryUUID(raw json.RawMessage) (string, error) {
	var v struct {
		UUID string `json:"UUID"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("query-uuid reply: %v: %w", err, ErrInvalid)
	}
	u := canonicalUUID(v.UUID)
	if u == "" && v.UUID != nilUUID {
		return "", fmt.Errorf("query-uuid: %.64q is not a UUID: %w", v.UUID, ErrInvalid)
	}
	return u, nil
}

// procID names a process: pid and start time (field 22 of its stat).
type procID struct {
	pid   int
	start uint64
}

// procOf is the QEMU process of t: its pid (else the monitor's peer)
// and start time.
func procOf(t Target, m Monitor) procID {
	id := procID{pid: t.PID, start: t.PIDStart}
	if id.pid <= 0 && m != nil {
		if p, err := peerPID(m); err == nil {
			id.pid = p
		}
	}
	if id.start == 0 && id.pid > 0 {
		id.start, _ = qemuproc.StartTime(id.pid)
	}
	return id
}

// vmUUID is the UUID of the VM whose targets sess serves (t is one of
// them): a libvirt domain's own, else QEMU's answer to query-uuid, asked
// once per QEMU process. "" when QEMU has none or could not be asked.
func (c *Collector) vmUUID(ctx context.Context, sess *session, t Target) string {
	if u := canonicalUUID(t.UUID); u != "" {
		return u
	}
	if t.Libvirt != nil {
		if u := canonicalUUID(t.Libvirt.UUID); u != "" {
			return u
		}
	}
	id := procOf(t, sess.c)
	if id.pid > 0 && id.start != 0 {
		c.mu.Lock()
		u, ok := c.uuids[id]
		c.mu.Unlock()
		if ok {
			return u
		}
	}
	if sess.c == nil {
		return ""
	}
	raw, err := sess.c.Execute(ctx, "query-uuid", nil)
	if err != nil {
		return "" // asked again at the next collection
	}
	u, err := parseQueryUUID(raw)
	if err != nil {
		return ""
	}
	if id.pid > 0 && id.start != 0 {
		c.mu.Lock()
		c.uuids[id] = u
		c.mu.Unlock()
	}
	return u
}

// vmKeyPrefix starts the ring key of a VM with a UUID.
const vmKeyPrefix = "uuid\x00"

// ringKey is where the Collector keeps t's ring counts: its VM's (UUID,
// NIC id) when the VM has a UUID, else t.Key() (its QEMU process). The
// -name is not in it: netctl migrate incoming on one host needs the
// destination under another -name. A clone (cloneOf) under another name
// has its own process's key instead.
func ringKey(t Target) string {
	if t.UUID == "" {
		return t.Key()
	}
	return vmKeyPrefix + t.UUID + "\x00" + t.NIC
}

func isVMKey(k string) bool { return strings.HasPrefix(k, vmKeyPrefix) }

// ringKeyOf is ringKey(t), remembered for Forget (which is given
// targets as listed, their UUID not known yet). Counts kept under t.Key()
// before the UUID was known move to the VM's key.
func (c *Collector) ringKeyOf(t Target) string {
	key := ringKey(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clones[t.Key()] {
		key = t.Key() // a clone of the VM: its own counts (cloneOf)
	}
	if pk := t.Key(); key != pk {
		if old := c.rings[pk]; old != nil && c.rings[key] == nil {
			c.rings[key] = old
		}
		delete(c.rings, pk)
	}
	c.alias[t.Key()] = key
	return key
}

// cloneOf says the QEMU id, whose target t is under another -name than
// the QEMU that counts the VM's rings r now, is not that VM come over but
// a clone of it with the same UUID: that QEMU still runs, never counted
// them before (a migration's source does, under its own name), and id
// was not started to receive a migration (-incoming). A clone stays one
// for its process's life (Collector.clones): it counts its own rings
// under its own key, and neither takes the VM's counts nor yields them.
func (c *Collector) cloneOf(r *ringState, t Target, id procID) bool {
	c.mu.Lock()
	if c.clones[t.Key()] {
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	r.mu.Lock()
	owner, vm, before := procID{r.pid, r.pidStart}, r.vm, slices.Contains(r.before, id)
	r.mu.Unlock()
	if vm == t.VM || before || (owner.pid == id.pid && (owner.start == 0 || id.start == 0 || owner.start == id.start)) {
		return false
	}
	if !alive(Target{PID: owner.pid, PIDStart: owner.start}) || startedIncoming(id.pid) {
		return false
	}
	c.mu.Lock()
	if len(c.clones) < maxUUIDs {
		c.clones[t.Key()] = true
	}
	c.mu.Unlock()
	return true
}

// maxBefore bounds ringState.before.
const maxBefore = 8

// ownedBy says r's rings are those of process id.
func (r *ringState) ownedBy(id procID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid == id.pid && (r.pidStart == 0 || id.start == 0 || r.pidStart == id.start)
}

// yieldTo says the QEMU id must leave r to the QEMU that counts it: one
// that still runs and did not start before id (the destination of a
// migration that took the NIC over, id its source); its pid.
func (r *ringState) yieldTo(id procID) (int, bool) {
	r.mu.Lock()
	owner := procID{r.pid, r.pidStart}
	r.mu.Unlock()
	if owner.pid == id.pid && (owner.start == 0 || id.start == 0 || owner.start == id.start) {
		return 0, false
	}
	if !alive(Target{PID: owner.pid, PIDStart: owner.start}) {
		return 0, false // its QEMU is gone: id may go on with its counts
	}
	newer := id.start != 0 && owner.start != 0 && id.start > owner.start
	return owner.pid, !newer
}

// startedIncoming says QEMU pid was started to receive a migration
// (-incoming on its command line, as libvirt's destinations and restores
// are): its guest's state came from another QEMU or a saved image.
func startedIncoming(pid int) bool {
	if pid <= 0 {
		return false
	}
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, qemuproc.MaxCmdline+1))
	if err != nil {
		return false
	}
	argv, _ := qemuproc.SplitCmdline(raw)
	for _, a := range argv[min(1, len(argv)):] {
		if a == "-incoming" || a == "--incoming" {
			return true
		}
	}
	return false
}

// prune drops what Forget kept longer than Options.KeepFor ago, and the
// cached UUIDs of QEMUs that exited once there are many.
func (c *Collector) prune() {
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.rings {
		if !isVMKey(k) {
			continue
		}
		r.mu.Lock()
		held := r.heldSince
		r.mu.Unlock()
		if !held.IsZero() && now.Sub(held) > c.o.KeepFor {
			delete(c.rings, k)
		}
	}
	for a, k := range c.alias {
		if c.rings[k] == nil {
			delete(c.alias, a)
		}
	}
	for k := range c.clones {
		if c.alias[k] == "" {
			delete(c.clones, k) // forgotten: its process is no longer listed
		}
	}
	if len(c.uuids) >= maxUUIDs {
		for id := range c.uuids {
			if !alive(Target{PID: id.pid, PIDStart: id.start}) {
				delete(c.uuids, id)
			}
		}
	}
}
