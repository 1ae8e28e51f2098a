package stats

import (
	"context"
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
// calls: where each data queue's avail->idx and used->idx live in QEMU
// (host virtual addresses from gpa2hva), the device status they were
// resolved under, the last 16-bit indices and the accumulated counts.
type ringState struct {
	mu          sync.Mutex // guards queues, fingerprint and stopped (Sample and Collect both read)
	pid         int
	pidStart    uint64
	fingerprint string // virtio status when resolved: another means a reset
	// stopped: a collection saw the device not running (a reset): the
	// addresses may no longer hold its rings, so Sample leaves them alone
	// until Collect resolves them again.
	stopped bool
	queues  []ringQueue
}

type ringQueue struct {
	vq                  int    // the virtqueue's index: 2*pair is rx, 2*pair+1 tx
	num                 int    // ring size (0: unknown)
	availIdx, usedIdx   uint64 // HVAs of avail->idx and used->idx in QEMU
	lastAvail, lastUsed uint16
	offered, completed  uint64
	primed              bool
}

// advance accumulates new 16-bit indices: the ring counts mod 65536, so
// the distance from the last value mod 65536 is what happened since, as
// long as fewer than 65536 descriptors passed between two reads.
func (q *ringQueue) advance(avail, used uint16) {
	if !q.primed {
		q.offered, q.completed = uint64(avail), uint64(used)
		q.primed = true
	} else {
		q.offered += uint64(avail - q.lastAvail)
		q.completed += uint64(used - q.lastUsed)
	}
	q.lastAvail, q.lastUsed = avail, used
}

// restart is a device reset: the driver starts its rings again at 0;
// the accumulated counts go on from where they were.
func (q *ringQueue) restart() {
	q.lastAvail, q.lastUsed = 0, 0
}

// locked returns a copy of r's counts taken under its lock.
func (r *ringState) locked() *ringState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &ringState{queues: slices.Clone(r.queues)}
}

// stats are the queues' accumulated counts.
func (r *ringState) stats() []QueueStats {
	out := make([]QueueStats, 0, len(r.queues))
	for _, q := range r.queues {
		dir := "rx"
		if q.vq%2 == 1 {
			dir = "tx"
		}
		out = append(out, QueueStats{Pair: q.vq / 2, Direction: dir, Offered: q.offered, Completed: q.completed})
	}
	return out
}

// addrs lists the HVAs to read: used->idx, then avail->idx, for each
// queue. Used first: process_vm_readv copies in order, and the device
// never uses more than was made available, so the avail read after it is
// at least the used one (see consistent).
func (r *ringState) addrs() []uint64 {
	a := make([]uint64, 0, 2*len(r.queues))
	for _, q := range r.queues {
		a = append(a, q.usedIdx, q.availIdx)
	}
	return a
}

// consistent checks a queue's indices against the split ring's invariant:
// the driver has at most num descriptors outstanding (avail - used <= num,
// mod 65536); allowing for what moves between the two reads, more than
// 2*num means the addresses no longer hold this ring's indices (the guest
// reset the device and placed its rings elsewhere without the status
// showing it between two collections).
func consistent(avail, used uint16, num int) bool {
	return num <= 0 || int(avail-used) <= 2*num
}

// sample reads the indices (process_vm_readv only) and accumulates them.
func (r *ringState) sample() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return fmt.Errorf("the device was reset since its rings were found: %w", ErrNotAvailable)
	}
	if r.pidStart != 0 {
		if st, err := qemuproc.StartTime(r.pid); err != nil || st != r.pidStart {
			return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", r.pid, ErrNotAvailable)
		}
	}
	v, err := readU16s(r.pid, r.addrs())
	if err != nil {
		return err
	}
	if r.pidStart != 0 {
		// Again after the read: the pid may have been reused between
		// the check and the read; what was read is then not QEMU's.
		if st, err := qemuproc.StartTime(r.pid); err != nil || st != r.pidStart {
			return fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", r.pid, ErrNotAvailable)
		}
	}
	for i, q := range r.queues {
		if !consistent(v[2*i+1], v[2*i], q.num) {
			return fmt.Errorf("queue %d: avail %d and used %d are more than twice the ring size %d apart: the ring moved: %w",
				q.vq, v[2*i+1], v[2*i], q.num, ErrNotAvailable)
		}
	}
	for i := range r.queues {
		r.queues[i].advance(v[2*i+1], v[2*i])
	}
	return nil
}

// session is one VM's QMP connection within one Collect (nil client:
// why says why there is none).
type session struct {
	c   *qmp.Client
	why string
}

func (s *session) close() {
	if s.c != nil {
		s.c.Close()
	}
}

// openSession dials the VM's monitor the way netctl attach does
// (qemuproc.Dial): a monitor another client holds is reported busy with
// the holder's name.
func (c *Collector) openSession(ctx context.Context, t Target) *session {
	vm := qemuproc.VM{PID: t.PID, StartTime: t.PIDStart, Name: t.VM,
		Monitors: []qemuproc.Monitor{{Option: "--qmp", Path: t.QMP, Socket: t.QMP, Server: true}}}
	if t.QMP == "" {
		// The monitors QEMU's command line names (libvirt's among them:
		// qemuproc.Dial then says to go through libvirt).
		found := false
		if t.PID > 0 {
			if vms, err := qemuproc.List(); err == nil {
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
	return &session{c: cl}
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
// reset since; resolving them again when it was or when a read fails.
func (c *Collector) readRings(ctx context.Context, sess *session, s *NICStats) {
	t := s.Target
	key := t.Key()
	c.mu.Lock()
	r := c.rings[key]
	c.mu.Unlock()
	if sess.c == nil {
		s.missing(SourceQMP, sess.why)
		if r == nil {
			s.missing(SourceRings, "no ring addresses yet and no QMP to find them: "+sess.why)
			return
		}
		if err := r.sample(); err != nil {
			s.missing(SourceRings, err.Error())
			return
		}
		s.Queues = r.locked().stats()
		return
	}
	path := devicePath(t.NIC)
	st, err := queryVirtioStatus(ctx, sess.c, path)
	if err != nil {
		if isGone(err) {
			err = fmt.Errorf("NIC gone: QEMU has no device %s (detached?): %w", t.NIC, err)
		}
		s.missing(SourceRings, err.Error())
		return
	}
	if !st.driverOK() {
		if r != nil {
			// A reset under way: whatever status the driver comes back
			// with, its rings start at 0 again (resolved afresh, the
			// counts carried over as after a reset).
			r.mu.Lock()
			r.fingerprint, r.stopped = st.fingerprint(), true
			r.mu.Unlock()
		}
		s.missing(SourceRings, fmt.Sprintf("the guest's driver has not started the device (status %s)", statusWords(st)))
		return
	}
	var fp string
	if r != nil {
		r.mu.Lock()
		fp = r.fingerprint
		r.mu.Unlock()
	}
	fresh := r == nil || fp != st.fingerprint() || r.pid != t.PID
	if !fresh {
		if err := r.sample(); err == nil {
			s.Queues = r.locked().stats()
			return
		}
	}
	nr, err := resolveRings(ctx, sess.c, path, t, st)
	if err != nil {
		s.missing(SourceRings, err.Error())
		return
	}
	nr.fingerprint = st.fingerprint()
	if r != nil && r.pid == nr.pid && r.pidStart == nr.pidStart {
		// The same QEMU (a reused pid is another process: its rings
		// start from its own indices).
		r.mu.Lock()
		// Carry the counts over. A status change is a reset (the rings
		// start at 0 again); a failed read with the same status (a
		// migration, a remap) keeps the indices.
		reset := r.fingerprint != nr.fingerprint
		old := map[int]ringQueue{}
		for _, q := range r.queues {
			old[q.vq] = q
		}
		for i := range nr.queues {
			o, ok := old[nr.queues[i].vq]
			if !ok {
				continue
			}
			nr.queues[i].offered, nr.queues[i].completed = o.offered, o.completed
			nr.queues[i].lastAvail, nr.queues[i].lastUsed = o.lastAvail, o.lastUsed
			nr.queues[i].primed = o.primed
			if reset {
				nr.queues[i].restart()
			}
		}
		r.mu.Unlock()
	}
	if err := nr.sample(); err != nil {
		s.missing(SourceRings, err.Error())
		return
	}
	c.mu.Lock()
	c.rings[key] = nr
	c.mu.Unlock()
	s.Queues = nr.locked().stats()
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

// resolveRings finds where each data queue's indices live in QEMU. For
// a device QEMU serves itself, x-query-virtio-queue-status gives each
// ring's guest-physical addresses. With vhost started, the queues of the
// vhost device QEMU's x-query-virtio-vhost-queue-status answers for
// (QEMU 7.2: the first queue pair's) come from it, because
// x-query-virtio-queue-status would ask the backend for its ring base
// (GET_VRING_BASE), which stops a vhost-user ring; the other queues, for
// which that command gives "Invalid vhost virtqueue number", come from
// x-query-virtio-queue-status, which asks the backend nothing about a
// queue outside that vhost device. Then HMP gpa2hva turns each address
// into QEMU's own.
func resolveRings(ctx context.Context, c *qmp.Client, path string, t Target, st *virtioStatus) (*ringState, error) {
	pairs := t.QueuePairs
	if n := st.NumVQs / 2; n > 0 && (pairs <= 0 || pairs > n) {
		pairs = n
	}
	if pairs <= 0 {
		return nil, fmt.Errorf("the device has no data queues (num-vqs %d): %w", st.NumVQs, ErrInvalid)
	}
	pid := t.PID
	if p, err := c.PeerPID(); err == nil {
		if pid != 0 && p != pid {
			return nil, fmt.Errorf("the monitor is served by pid %d, not the VM's pid %d: %w", p, pid, ErrInvalid)
		}
		pid = p
	}
	r := &ringState{pid: pid, pidStart: t.PIDStart}
	if r.pidStart == 0 {
		r.pidStart, _ = qemuproc.StartTime(pid)
	}
	vhost := st.VhostStarted
	for q := 0; q < 2*pairs; q++ {
		a, err := queueAddresses(ctx, c, path, q, vhost)
		if errors.Is(err, errNoRing) {
			// A queue the driver did not set up (iPXE uses one pair;
			// Linux sets up every pair it may use): left out.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", q, err)
		}
		av, err := gpa2hva(ctx, c, a.Avail+2)
		if err != nil {
			return nil, fmt.Errorf("queue %d avail ring: %w", q, err)
		}
		us, err := gpa2hva(ctx, c, a.Used+2)
		if err != nil {
			return nil, fmt.Errorf("queue %d used ring: %w", q, err)
		}
		r.queues = append(r.queues, ringQueue{vq: q, num: a.Num, availIdx: av, usedIdx: us})
	}
	if len(r.queues) == 0 {
		return nil, fmt.Errorf("the guest's driver has set up none of the %d data queues: %w", 2*pairs, ErrNotAvailable)
	}
	return r, nil
}

// queueAddresses asks QEMU for one queue's ring addresses (see
// resolveRings for which command asks what).
func queueAddresses(ctx context.Context, c *qmp.Client, path string, q int, vhost bool) (queueAddrs, error) {
	args := map[string]any{"path": path, "queue": q}
	if vhost {
		raw, err := c.Execute(ctx, "x-query-virtio-vhost-queue-status", args)
		if err == nil {
			return parseVhostQueueStatus(raw)
		}
		var qe *qmp.Error
		if !errors.As(err, &qe) || !strings.Contains(qe.Desc, "Invalid vhost virtqueue number") {
			return queueAddrs{}, qmpErr("x-query-virtio-vhost-queue-status", err)
		}
	}
	raw, err := c.Execute(ctx, "x-query-virtio-queue-status", args)
	if err != nil {
		return queueAddrs{}, qmpErr("x-query-virtio-queue-status", err)
	}
	return parseQueueStatus(raw)
}

// gpa2hva asks QEMU where a guest-physical address is in its own memory
// (HMP gpa2hva, through human-monitor-command).
func gpa2hva(ctx context.Context, c *qmp.Client, gpa uint64) (uint64, error) {
	var out string
	if err := c.Run(ctx, "human-monitor-command", map[string]string{"command-line": fmt.Sprintf("gpa2hva %#x", gpa)}, &out); err != nil {
		return 0, fmt.Errorf("gpa2hva: %w", err)
	}
	return parseGPA2HVA(out)
}

// Sample reads the ring indices of every NIC the Collector knows
// (process_vm_readv only: no QMP, no netlink) and accumulates them, so
// that no 16-bit wrap is missed between two collections. A ring index
// wraps after 65536 descriptors: sampled every T, a queue is followed
// correctly up to 65535/T descriptors per second (655,350/s at
// T = 100 ms; about 6.5 million/s at 10 ms). Without Sample, Collect
// alone follows 65535 per collection interval. A read that fails is left
// for the next Collect, which resolves the addresses again. Safe to call
// concurrently with Collect.
func (c *Collector) Sample() {
	c.mu.Lock()
	rs := make([]*ringState, 0, len(c.rings))
	for _, r := range c.rings {
		rs = append(rs, r)
	}
	c.mu.Unlock()
	for _, r := range rs {
		_ = r.sample()
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
