package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/qmp"
)

// ringState is what the Collector keeps about one NIC's rings between
// calls: where each data queue's ring headers live in QEMU (host virtual
// addresses from gpa2hva, and the guest-physical ones they came from),
// the device status they were resolved under, the last 16-bit indices
// and the accumulated counts.
type ringState struct {
	mu          sync.Mutex // guards everything below (Sample and Collect both read)
	pid         int
	pidStart    uint64
	fingerprint string // virtio status when resolved: another means a reset
	// stopped: a collection saw the device not running (a reset): the
	// addresses may no longer hold its rings, so Sample leaves them alone
	// until Collect resolves them again.
	stopped bool
	// suspect: a read no collection had validated (the sampler's, or one
	// without QMP) saw what a live ring never does (flags a driver or
	// device never sets, indices back at 0, a jump of more than half the
	// index range): nothing is counted from then on until a collection
	// has checked the ring over QMP. Each queue keeps what such reads
	// showed of it (ringQueue.seen): the collection restarts only the
	// queues seen reset, rebases only those seen stepping, and counts
	// the others on (a queue can be reset alone: virtio 1.2's queue
	// reset, Linux's ethtool -G or an AF_XDP socket on one queue).
	suspect string
	// partial: some data queues could not be asked for safely (a
	// vhost-user or vdpa device's own queues while vhost is stopped):
	// each collection tries again.
	partial bool
	// gone: a collection saw the device unplugged (stopped is set too).
	gone bool
	// heldSince: Forget kept these counts (a VM's, for another QEMU of
	// it to go on with) at this time: nothing reads the rings until a
	// collection resolves them again (zero: not held).
	heldSince time.Time
	// attached: when netctl attached the NIC whose rings these are
	// (Target.Attached; zero for a NIC found over QMP): another is
	// another device, its rings new.
	attached time.Time
	// vm is the -name of the QEMU that counts them (pid); before the
	// QEMUs of the VM that counted them earlier (a migration's source),
	// at most maxBefore, for cloneOf.
	vm     string
	before []procID
	readAt time.Time // when the indices were last read
	queues []ringQueue
}

type ringQueue struct {
	vq                  int    // the virtqueue's index: 2*pair is rx, 2*pair+1 tx
	num                 int    // ring size (0: unknown)
	availGPA, usedGPA   uint64 // the rings' guest-physical addresses (what QEMU answers)
	avail, used         uint64 // HVAs of the avail and used rings' headers (flags, idx) in QEMU
	lastAvail, lastUsed uint16
	offered, completed  uint64
	primed              bool
	// uncounted: steps not counted because they were ambiguous (more than
	// half a turn: a step back such as a loadvm, or a reset unseen).
	uncounted uint64
	// seen: what reads no collection validated showed of this queue
	// since the last one that was (while the ring is suspect).
	seen seenKind
}

// seenKind is what an unvalidated read showed of one queue.
type seenKind uint8

const (
	seenNothing seenKind = iota // what a live ring does
	// seenStep: more than half a turn from the last indices (a loadvm
	// that took them back, or a reset whose new ring at the same place
	// is in use already): what the collection reads is the new base.
	seenStep
	// seenReset: indices back at 0, or a header no split ring has (its
	// memory freed or reused): the queue's new ring counts from 0.
	seenReset
)

// verdict says what an unvalidated read of the queue's headers shows,
// and why when it is not what a live ring does.
func (q *ringQueue) verdict(availFlags, avail, usedFlags, used uint16) (seenKind, string) {
	switch {
	case !consistent(availFlags, avail, usedFlags, used, q.num):
		return seenReset, fmt.Sprintf("queue %d: avail flags %#x idx %d, used flags %#x idx %d are not a split ring's (ring size %d): the ring moved",
			q.vq, availFlags, avail, usedFlags, used, q.num)
	case !q.primed:
		return seenNothing, ""
	case avail == 0 && used == 0 && (q.lastAvail != 0 || q.lastUsed != 0):
		// A ring's indices start at 0 when its driver sets it up: back at
		// 0 is a reset (or the freed ring's memory zeroed), far likelier
		// than both indices wrapping to 0 at once.
		return seenReset, fmt.Sprintf("queue %d: its indices went back to 0 from avail %d, used %d", q.vq, q.lastAvail, q.lastUsed)
	case avail-q.lastAvail > halfTurn || used-q.lastUsed > halfTurn:
		return seenStep, fmt.Sprintf("queue %d: avail %d -> %d, used %d -> %d is more than half a turn of the 16-bit index", q.vq, q.lastAvail, avail, q.lastUsed, used)
	}
	return seenNothing, ""
}

// halfTurn: a step of more than half the 16-bit index range between
// two reads is never taken as traffic: it is as likely the indices going
// back (a loadvm, a snapshot revert: guest memory restored in the same
// QEMU, rings and status unchanged) as that many descriptors. Between
// reads no collection validated it makes the ring suspect; in a
// validated read it becomes the new base, counted as one uncounted step.
const halfTurn = 1 << 15

// advance accumulates new 16-bit indices: the ring counts mod 65536, so
// the distance from the last value mod 65536 is what happened since, as
// long as fewer than 65536 descriptors passed between two reads. The
// first read is the base: the counts start at 0 (what netctl saw, not
// the ring's raw index). Indices back at exactly 0 are a reset (nothing
// counted); a step of more than half a turn is taken as the new base,
// not counted (one uncounted step). An unvalidated read (the sampler's)
// calls it only when verdict found nothing wrong with any queue.
func (q *ringQueue) advance(avail, used uint16) {
	if !q.primed {
		q.lastAvail, q.lastUsed, q.primed = avail, used, true
		return
	}
	if avail == 0 && used == 0 && (q.lastAvail != 0 || q.lastUsed != 0) {
		q.lastAvail, q.lastUsed = 0, 0
		return
	}
	da, du := avail-q.lastAvail, used-q.lastUsed
	if da > halfTurn || du > halfTurn {
		q.rebase(avail, used)
		return
	}
	q.offered += uint64(da)
	q.completed += uint64(du)
	q.lastAvail, q.lastUsed = avail, used
}

// rebase takes what was read as the new base: the step to it is not
// counted (one uncounted step).
func (q *ringQueue) rebase(avail, used uint16) {
	q.lastAvail, q.lastUsed, q.primed = avail, used, true
	q.uncounted++
}

// restart is a device reset: the driver starts its rings at 0 again;
// the accumulated counts go on from where they were.
func (q *ringQueue) restart() {
	q.lastAvail, q.lastUsed = 0, 0
}

// snapshot is a copy of r's counts and read time taken under its lock.
func (r *ringState) snapshot() ([]QueueStats, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats(), r.readAt
}

// stats are the queues' accumulated counts (r.mu held).
func (r *ringState) stats() []QueueStats {
	out := make([]QueueStats, 0, len(r.queues))
	for _, q := range r.queues {
		dir := "rx"
		if q.vq%2 == 1 {
			dir = "tx"
		}
		out = append(out, QueueStats{Pair: q.vq / 2, Direction: dir, Offered: q.offered, Completed: q.completed,
			AvailIdx: q.lastAvail, UsedIdx: q.lastUsed, Uncounted: q.uncounted})
	}
	return out
}

// addrs lists the HVAs to read: the used ring's flags and idx, then the
// avail ring's, for each queue. Used first: process_vm_readv copies in
// order, and the device never uses more than was made available, so the
// avail read after it is at least the used one (see consistent).
func (r *ringState) addrs() []uint64 {
	a := make([]uint64, 0, 4*len(r.queues))
	for _, q := range r.queues {
		a = append(a, q.used, q.used+2, q.avail, q.avail+2)
	}
	return a
}

// consistent checks a queue's ring headers against what a split ring
// holds: the only flag either side may set is bit 0 (the driver's
// VIRTQ_AVAIL_F_NO_INTERRUPT, the device's VIRTQ_USED_F_NO_NOTIFY:
// virtio 1.x 2.7.7 and 2.7.10, "MUST set flags to 0 or 1"), and the
// driver has at most num descriptors outstanding (avail - used <= num,
// mod 65536; allowing for what moves between the two reads, more than
// 2*num). Memory that is no longer this ring (the guest freed it after
// a reset) fails it but for about one read in 10^11.
func consistent(availFlags, avail, usedFlags, used uint16, num int) bool {
	return availFlags&^1 == 0 && usedFlags&^1 == 0 && (num <= 0 || int(avail-used) <= 2*num)
}

// sample reads the indices (process_vm_readv only) and accumulates them.
// validated: the caller (Collect) has just checked over QMP that the
// device runs with its rings where they were; a suspect ring is then
// taken as reset. Otherwise (Sample, a collection without QMP) a
// suspect ring is left alone, and a read that looks like anything but
// this ring makes it suspect.
func (r *ringState) sample(validated bool, now func() time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return fmt.Errorf("the device was reset since its rings were found: %w", ErrNotAvailable)
	}
	if !r.heldSince.IsZero() {
		return fmt.Errorf("not counted until the monitor confirms the rings (the NIC was not listed): %w", ErrNotAvailable)
	}
	if r.suspect != "" && !validated {
		return fmt.Errorf("not counted until the monitor confirms the rings (a reset?): %s: %w", r.suspect, ErrNotAvailable)
	}
	// Gone: another process, or none, under the pid, or QEMU killed
	// and not reaped yet (a zombie has its pid and start time, but no
	// executable or memory left to read).
	if !alive(Target{PID: r.pid, PIDStart: r.pidStart}) {
		return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", r.pid, ErrNotAvailable)
	}
	v, err := readU16s(r.pid, r.addrs())
	at := now()
	if err != nil {
		if !alive(Target{PID: r.pid, PIDStart: r.pidStart}) {
			return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", r.pid, ErrNotAvailable)
		}
		return err
	}
	if r.pidStart != 0 {
		// Again after the read: the pid may have been reused between
		// the check and the read; what was read is then not QEMU's.
		if st, err := qemuproc.StartTime(r.pid); err != nil || st != r.pidStart {
			return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", r.pid, ErrNotAvailable)
		}
	}
	if !validated {
		// Check every queue before counting any: one suspect queue holds
		// back the whole read. While the ring is suspect, reads only
		// gather what each queue shows (a reset seen on one queue is not
		// one of the others).
		why := ""
		for i := range r.queues {
			q := &r.queues[i]
			if k, w := q.verdict(v[4*i+2], v[4*i+3], v[4*i], v[4*i+1]); k != seenNothing {
				q.seen = max(q.seen, k)
				if why == "" {
					why = w
				}
			}
		}
		if r.suspect == "" {
			r.suspect = why
		}
		if r.suspect != "" {
			return fmt.Errorf("not counted until the monitor confirms the rings (a reset?): %s: %w", r.suspect, ErrNotAvailable)
		}
		for i := range r.queues {
			r.queues[i].advance(v[4*i+3], v[4*i+1])
		}
		r.readAt = at
		return nil
	}
	for i, q := range r.queues {
		usedFlags, used, availFlags, avail := v[4*i], v[4*i+1], v[4*i+2], v[4*i+3]
		if !consistent(availFlags, avail, usedFlags, used, q.num) {
			return fmt.Errorf("queue %d: avail flags %#x idx %d, used flags %#x idx %d are not a split ring's (ring size %d): the ring moved: %w",
				q.vq, availFlags, avail, usedFlags, used, q.num, ErrNotAvailable)
		}
	}
	// The rings are where they were (the caller checked). A queue that
	// reads since the last collection saw back at 0 or as memory that
	// was not a ring was reset (its driver set it up again in the same
	// place): its new ring counts from 0. One seen stepping more than
	// half a turn (a loadvm took its indices back, or a reset whose new
	// ring is past 0 already): what is read now is its new base, nothing
	// counted for the step. The others go on.
	next := slices.Clone(r.queues)
	for i := range next {
		q := &next[i]
		switch q.seen {
		case seenReset:
			q.restart()
		case seenStep:
			q.rebase(v[4*i+3], v[4*i+1])
		}
		q.seen = seenNothing
		q.advance(v[4*i+3], v[4*i+1])
	}
	r.suspect, r.queues, r.readAt = "", next, at
	return nil
}

// markStopped records that a collection saw the device not running.
func (r *ringState) markStopped(fingerprint string) {
	r.mu.Lock()
	r.fingerprint, r.stopped = fingerprint, true
	r.mu.Unlock()
}

// markGone records that a collection saw the device gone (unplugged).
func (r *ringState) markGone() {
	r.mu.Lock()
	r.stopped, r.gone = true, true
	r.mu.Unlock()
}

// session is one VM's monitor within one Collect: a QMP connection, or
// libvirt's passthrough (nil c: why says why there is none). closer ends
// it (nil: nothing to end).
type session struct {
	c      Monitor
	why    string
	closer func()
	// lv is the libvirt connection of a libvirt domain's targets (nil
	// otherwise): libvirt's interface counters where the tap is not on
	// this host.
	lv linkStatser
	// tainted: c is libvirt's passthrough (the domain is tainted).
	tainted bool
	// rings: why the rings are not read at all (a libvirt domain without
	// the opt-in: NoMonitorWhy); "" when why covers it.
	rings string
}

func (s *session) close() {
	if s.closer != nil {
		s.closer()
	}
}

// openSession dials the VM's monitor the way netctl attach does
// (qemuproc.Dial): a monitor another client holds is reported busy with
// the holder's name.
func (c *Collector) openSession(ctx context.Context, t Target, scan *kthreadScan) *session {
	if t.Libvirt != nil {
		return c.libvirtSession(ctx, t)
	}
	vm := qemuproc.VM{PID: t.PID, StartTime: t.PIDStart, Name: t.VM,
		Monitors: []qemuproc.Monitor{{Option: "--qmp", Path: t.QMP, Socket: t.QMP, Server: true}}}
	if t.QMP == "" {
		// The monitors QEMU's command line names (libvirt's among them:
		// qemuproc.Dial then says to go through libvirt).
		found := false
		if t.PID > 0 {
			if vms, err := scan.qemus(); err == nil {
				for _, v := range vms {
					if v.PID == t.PID {
						vm, found = v, true
					}
				}
			}
		}
		if !found {
			return &session{why: "no QMP monitor is known for this VM: name it with --qmp SOCKET"}
		}
	}
	cl, err := qemuproc.Dial(ctx, vm)
	if err != nil {
		why := err.Error()
		switch {
		case errors.Is(err, ErrBusy):
			why = "monitor busy: " + strings.TrimPrefix(why, "qemuproc: ")
		case strings.Contains(why, "exited") || socketGone(err) || !alive(t):
			why = "VM gone: " + strings.TrimPrefix(why, "qemuproc: ")
		}
		return &session{why: why}
	}
	return &session{c: cl, closer: func() { cl.Close() }}
}

// alive says the target's QEMU still runs: same pid and start time, and
// not a zombie (exited, its parent has not reaped it yet). A target
// without a pid is taken as alive.
func alive(t Target) bool {
	if t.PID <= 0 {
		return true // unknown: nothing says it is gone
	}
	st, err := readStat(filepath.Join(procRoot, strconv.Itoa(t.PID), "stat"))
	return err == nil && st.State != 'Z' && st.State != 'X' && (t.PIDStart == 0 || st.StartTime == t.PIDStart)
}

// socketGone says the monitor's socket is gone or nobody listens: the
// VM has exited (QEMU removes its socket).
func socketGone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// readRings fills s.Queues: from the cached ring addresses, after
// checking over QMP (when there is a connection) that the device was not
// reset since and its rings are where they were; resolving them again
// when they moved, the device was reset or a read fails.
//
// What is a reset: the device's status changing (the driver reset it:
// status 0, then set up again), its rings' addresses changing, or a read
// between collections that saw what a live ring never does. What is not:
// vhost stopping and starting (a paused VM, set_link off/on, a snapshot,
// a migration's source), which leaves the rings where they were, their
// indices going on.
func (c *Collector) readRings(ctx context.Context, sess *session, s *NICStats) {
	t := s.Target
	key := c.ringKeyOf(t)
	c.mu.Lock()
	r := c.rings[key]
	c.mu.Unlock()
	if sess.c == nil {
		s.missing(SourceQMP, sess.why)
	}
	id := procOf(t, sess.c)
	if r != nil && isVMKey(key) && c.cloneOf(r, t, id) {
		key = t.Key()
		c.mu.Lock()
		c.alias[t.Key()] = key
		r = c.rings[key]
		c.mu.Unlock()
	}
	if r != nil {
		// The VM's counts, another QEMU of it counting them now (a
		// migration's destination took the NIC over): this one leaves them.
		if pid, yield := r.yieldTo(id); yield {
			s.missing(SourceRings, fmt.Sprintf("NIC gone from this QEMU: counted from QEMU pid %d now, which runs the same VM (UUID %s) and has taken the NIC over (a migration's destination)", pid, t.UUID))
			return
		}
	}
	// mine: r holds this QEMU's rings; otherwise this QEMU may take the
	// VM's counts over once its rings are found (continuity.go), and
	// until then changes nothing in them.
	mine := r != nil && r.ownedBy(id)
	if sess.c == nil {
		if sess.rings != "" {
			s.missing(SourceRings, sess.rings)
			return
		}
		if !mine {
			s.missing(SourceRings, "no ring addresses yet and no QMP to find them: "+sess.why)
			return
		}
		if err := r.sample(false, c.o.Now); err != nil {
			s.missing(SourceRings, err.Error())
			return
		}
		s.Queues, s.RingsTime = r.snapshot()
		return
	}
	path := devicePath(t.qomID())
	st, err := queryVirtioStatus(ctx, sess.c, path)
	if err != nil {
		if isGone(err) {
			err = fmt.Errorf("NIC gone: QEMU has no device %s (detached?): %w", t.NIC, err)
			if mine {
				// Its rings are memory the guest has freed: not read
				// again, and a device plugged back under the same id
				// counts from 0 (the counts carried over), wherever
				// its rings are.
				r.markGone()
			}
		}
		s.missing(SourceRings, err.Error())
		return
	}
	if st.packed() {
		// A packed ring has no avail and used indices to read.
		if mine {
			c.drop(key, r)
		}
		s.missing(SourceRings, "packed ring: not counted (the guest negotiated VIRTIO_F_RING_PACKED: netctl reads split rings only)")
		return
	}
	if st.accessPlatform() {
		// The addresses QEMU gives are I/O virtual addresses behind the
		// guest's vIOMMU (if it has one: SEV/TDX guests negotiate the bit
		// without), not guest-physical: gpa2hva would name some other page.
		if mine {
			c.drop(key, r)
		}
		s.missing(SourceRings, "IOMMU platform: not counted (the guest negotiated VIRTIO_F_ACCESS_PLATFORM, iommu_platform=on: the ring addresses QEMU reports are I/O virtual addresses netctl cannot translate)")
		return
	}
	if !st.driverOK() {
		if mine {
			// A reset under way: whatever status the driver comes back
			// with, its rings start at 0 again (resolved afresh, the
			// counts carried over as after a reset).
			r.markStopped(st.fingerprint())
		}
		// Another QEMU's counts (an incoming migration still loading
		// the device's state) are left as they are.
		s.missing(SourceRings, fmt.Sprintf("the guest's driver has not started the device (status %s)", statusWords(st)))
		return
	}
	if mine {
		r.mu.Lock()
		same := r.fingerprint == st.fingerprint() && !r.stopped && !r.partial && r.heldSince.IsZero() && r.attached.Equal(t.Attached)
		r.mu.Unlock()
		if same && r.sameAddresses(ctx, sess.c, path, t) {
			if err := r.sample(true, c.o.Now); err == nil {
				s.Queues, s.RingsTime = r.snapshot()
				return
			}
		}
	}
	nr, err := resolveRings(ctx, sess.c, path, t, st)
	if err != nil {
		s.missing(SourceRings, err.Error())
		return
	}
	nr.fingerprint = st.fingerprint()
	nr.vm = t.VM
	if r != nil {
		// The same QEMU, or another QEMU of the VM taking its counts over
		// (continuity.go). A reused pid is another process.
		moved := !r.ownedBy(procID{nr.pid, nr.pidStart})
		// A QEMU started with -incoming has the guest's rings, indices
		// and all, from the QEMU before it: they go on. The old QEMU's
		// NIC unplugged after the switchover (its record released) is
		// not a reset of these rings.
		incoming := moved && startedIncoming(nr.pid)
		r.mu.Lock()
		// Carry the counts over. A status change or a reset seen reset
		// every queue, as do another QEMU that booted the guest itself
		// and, in the same QEMU, a NIC netctl attached again (a new
		// device: its driver sets its rings up from 0, maybe on the same
		// pages); rings at other addresses, or a queue reads saw reset,
		// start that queue at 0 again. A failed read with the same status
		// and addresses (a remap) keeps the indices.
		nr.before = r.before
		if moved {
			nr.before = append(slices.Clone(r.before), procID{r.pid, r.pidStart})
			if len(nr.before) > maxBefore {
				nr.before = nr.before[len(nr.before)-maxBefore:]
			}
		}
		reattached := !moved && !r.attached.Equal(nr.attached)
		reset := r.fingerprint != nr.fingerprint || (r.stopped && !(incoming && r.gone)) || (moved && !incoming) || reattached
		old := map[int]ringQueue{}
		for _, q := range r.queues {
			old[q.vq] = q
		}
		for i := range nr.queues {
			o, ok := old[nr.queues[i].vq]
			if !ok {
				continue
			}
			nq := &nr.queues[i]
			nq.offered, nq.completed = o.offered, o.completed
			nq.lastAvail, nq.lastUsed, nq.primed, nq.uncounted = o.lastAvail, o.lastUsed, o.primed, o.uncounted
			// What reads since the last collection saw of this queue
			// (seen is set only while the ring is suspect): seen reset,
			// its new ring counts from 0; seen stepping (a loadvm moves
			// no ring), what is read is its new base. The others go on.
			switch {
			case reset || nq.availGPA != o.availGPA || nq.usedGPA != o.usedGPA || o.seen == seenReset:
				nq.restart()
			case o.seen == seenStep:
				nq.primed = false // the next read is the base
				nq.uncounted++
			}
		}
		r.mu.Unlock()
	}
	if err := nr.sample(true, c.o.Now); err != nil {
		s.missing(SourceRings, err.Error())
		return
	}
	c.mu.Lock()
	if c.rings[key] != r {
		// Another QEMU of the VM was read at the same time and took the
		// counts first: carrying from what this one started with could
		// count twice.
		c.mu.Unlock()
		s.missing(SourceRings, "not counted until the next collection: another QEMU of the same VM (UUID "+t.UUID+") was read at the same time, and the next collection decides which one counts")
		return
	}
	c.rings[key] = nr
	c.mu.Unlock()
	s.Queues, s.RingsTime = nr.snapshot()
}

// drop deletes the ring state r under key, unless another has replaced it.
func (c *Collector) drop(key string, r *ringState) {
	c.mu.Lock()
	if c.rings[key] == r {
		delete(c.rings, key)
	}
	c.mu.Unlock()
}

// sameAddresses asks QEMU again (safely: askQueue) where each cached
// queue's rings are, and says whether they are all where they were. A
// queue that cannot be asked now (a vhost-user device's own queue while
// vhost is stopped) counts as unchanged: the status said no reset.
func (r *ringState) sameAddresses(ctx context.Context, c Monitor, path string, t Target) bool {
	r.mu.Lock()
	qs := slices.Clone(r.queues)
	r.mu.Unlock()
	for _, q := range qs {
		a, err := queueAddresses(ctx, c, path, q.vq, t)
		if errors.Is(err, errNotAsked) {
			continue
		}
		if err != nil || a.Avail != q.availGPA || a.Used != q.usedGPA {
			return false
		}
	}
	return true
}

// statusWords shortens the status names ("ACKNOWLEDGE|DRIVER").
func statusWords(st *virtioStatus) string {
	var w []string
	for _, s := range st.Status.Statuses {
		name, _, _ := strings.Cut(s, ":")
		w = append(w, strings.TrimPrefix(name, "VIRTIO_CONFIG_S_"))
	}
	if len(w) == 0 {
		return "0"
	}
	return strings.Join(w, "|")
}

// isGone says a QMP error means the device is not there.
func isGone(err error) bool {
	var qe *qmp.Error
	return errors.As(err, &qe) && (qe.Class == "DeviceNotFound" || strings.Contains(qe.Desc, "is not a VirtIODevice"))
}

// resolveRings finds where each data queue's rings live in QEMU:
// queueAddresses gives each ring's guest-physical addresses (asking only
// what cannot change the device), then HMP gpa2hva turns each into
// QEMU's own.
func resolveRings(ctx context.Context, c Monitor, path string, t Target, st *virtioStatus) (*ringState, error) {
	pairs := t.QueuePairs
	if n := st.NumVQs / 2; n > 0 && (pairs <= 0 || pairs > n) {
		pairs = n
	}
	if pairs <= 0 {
		return nil, fmt.Errorf("the device has no data queues (num-vqs %d): %w", st.NumVQs, ErrInvalid)
	}
	pid := t.PID
	if p, err := peerPID(c); err == nil {
		if pid != 0 && p != pid {
			return nil, fmt.Errorf("the monitor is served by pid %d, not the VM's pid %d: %w", p, pid, ErrInvalid)
		}
		pid = p
	}
	r := &ringState{pid: pid, pidStart: t.PIDStart, attached: t.Attached}
	if r.pidStart == 0 {
		r.pidStart, _ = qemuproc.StartTime(pid)
	}
	var notAsked error
	for q := 0; q < 2*pairs; q++ {
		a, err := queueAddresses(ctx, c, path, q, t)
		if errors.Is(err, errNoRing) {
			// A queue the driver did not set up (iPXE uses one pair;
			// Linux sets up every pair it may use): left out.
			continue
		}
		if errors.Is(err, errNotAsked) {
			r.partial, notAsked = true, err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", q, err)
		}
		av, err := gpa2hva(ctx, c, a.Avail)
		if err != nil {
			return nil, fmt.Errorf("queue %d avail ring: %w", q, err)
		}
		us, err := gpa2hva(ctx, c, a.Used)
		if err != nil {
			return nil, fmt.Errorf("queue %d used ring: %w", q, err)
		}
		r.queues = append(r.queues, ringQueue{vq: q, num: a.Num, availGPA: a.Avail, usedGPA: a.Used, avail: av, used: us})
	}
	if len(r.queues) == 0 {
		if notAsked != nil {
			return nil, notAsked
		}
		return nil, fmt.Errorf("the guest's driver has set up none of the %d data queues: %w", 2*pairs, ErrNotAvailable)
	}
	return r, nil
}

// errNotAsked: the queue's addresses could not be asked for without
// risk to the device now.
var errNotAsked = fmt.Errorf("vhost is stopped (the VM paused, its link down, or the backend not connected), and the only query that would give these rings' addresses would stop a vhost-user or vdpa ring: they are counted once vhost runs: %w", ErrNotAvailable)

// queueAddresses asks QEMU for one queue's ring addresses, never with a
// query that can change the device.
//
// QEMU (7.2 to at least 9.x, qmp_x_query_virtio_queue_status) answers
// x-query-virtio-queue-status of a queue of the device's vhost device
// (virtio-net's get_vhost: the first queue pair's) while vhost runs by
// asking the backend for its ring base (vhost_get_vring_base): on
// vhost-user that is GET_VRING_BASE, which stops the ring in the backend
// for good; on vhost-vdpa it asks the parent driver (vduse: its
// userspace daemon). Whether vhost runs can change between any two
// queries (a resume, set_link on), so for those netdevs the first pair's
// queues are asked only with x-query-virtio-vhost-queue-status, which
// reads QEMU's own copy and fails while vhost is stopped (errNotAsked
// then). On a tap (the kernel's vhost-net: VHOST_GET_VRING_BASE only
// reads last_avail_idx) and on netdevs without vhost it is harmless, as
// it is for every other queue (no vhost device answers for them).
func queueAddresses(ctx context.Context, c Monitor, path string, q int, t Target) (queueAddrs, error) {
	args := map[string]any{"path": path, "queue": q}
	if q < 2 {
		raw, err := c.Execute(ctx, "x-query-virtio-vhost-queue-status", args)
		if err == nil {
			return parseVhostQueueStatus(raw)
		}
		var qe *qmp.Error
		if !errors.As(err, &qe) {
			return queueAddrs{}, qmpErr("x-query-virtio-vhost-queue-status", err)
		}
		if !queueStatusSafe(t.NetdevType) {
			return queueAddrs{}, errNotAsked
		}
		// vhost stopped, or not vhost's queue: QEMU's own copy below.
	}
	raw, err := c.Execute(ctx, "x-query-virtio-queue-status", args)
	if err != nil {
		return queueAddrs{}, qmpErr("x-query-virtio-queue-status", err)
	}
	return parseQueueStatus(raw)
}

// queueStatusSafe says x-query-virtio-queue-status of the first pair's
// queues can change nothing for a netdev of this type, whether vhost
// runs or not (see queueAddresses): a tap (kernel vhost-net) or a netdev
// that has no vhost. An unknown type is not safe.
func queueStatusSafe(netdevType string) bool {
	switch netdevType {
	case "tap", "user", "socket", "stream", "dgram", "l2tpv3", "bridge", "hubport", "vde", "netmap", "af-xdp", "vmnet-host", "vmnet-shared", "vmnet-bridged":
		return true
	}
	return false
}

// gpa2hva asks QEMU where a guest-physical address is in its own memory
// (HMP gpa2hva, through human-monitor-command).
func gpa2hva(ctx context.Context, c Monitor, gpa uint64) (uint64, error) {
	var out string
	raw, err := c.Execute(ctx, "human-monitor-command", map[string]string{"command-line": fmt.Sprintf("gpa2hva %#x", gpa)})
	if err != nil {
		return 0, fmt.Errorf("gpa2hva: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("gpa2hva: the reply is not a string: %v: %w", err, ErrInvalid)
	}
	return parseGPA2HVA(out)
}

// Sample reads the ring indices of every NIC the Collector knows
// (process_vm_readv only: no QMP, no netlink) and accumulates them, so
// that no 16-bit wrap is missed between two collections. A ring index
// wraps after 65536 descriptors; Sample counts a step of at most half
// of that (32768) between two of its reads, since it cannot ask QEMU
// whether the ring is still there (a larger one, indices back at 0 or
// flags no split ring has make the ring suspect: nothing more is counted
// until the next Collect has checked it over QMP, which then takes it as
// a reset). Sampled every T, a queue is followed correctly up to 32768/T
// descriptors per second (327,680/s at T = 100 ms; about 3.3 million/s
// at 10 ms). Without Sample, Collect alone follows 32768 per collection
// interval (a larger step between two collections is taken as a new
// base, counted in Uncounted: it cannot be told from a step back such as
// a loadvm's). A read that fails is left for the next Collect, which
// resolves the addresses again. Safe to call concurrently with Collect.
func (c *Collector) Sample() {
	c.mu.Lock()
	rs := make([]*ringState, 0, len(c.rings))
	for _, r := range c.rings {
		rs = append(rs, r)
	}
	c.mu.Unlock()
	for _, r := range rs {
		_ = r.sample(false, c.o.Now)
	}
}

// SampleEvery calls Sample every d until ctx ends; run it in its own
// goroutine next to periodic Collect calls (go c.SampleEvery(ctx,
// 100*time.Millisecond)). See Sample for the rate d lets it follow.
func (c *Collector) SampleEvery(ctx context.Context, d time.Duration) {
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			c.Sample()
		}
	}
}
