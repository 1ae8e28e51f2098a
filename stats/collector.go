package stats

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/policy"
)

// DefaultDeadline is Options.Deadline's default.
const DefaultDeadline = 5 * time.Second

// Options configure a Collector.
type Options struct {
	// Deadline bounds the reading of one NIC in one collection (QMP,
	// netlink, /proc); 0 is DefaultDeadline. A NIC that takes longer gets
	// Missing entries saying so; the others are not held up.
	Deadline time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// LibvirtMonitor: for a libvirt domain's NICs, ask QEMU through
	// libvirt's monitor passthrough (virDomainQemuMonitorCommand) for what
	// only QEMU knows (the rings). libvirt then marks the domain "tainted:
	// custom-monitor" (NICStats.Tainted). Without it a libvirt domain's
	// NICs are read from what libvirt and the host report: the link
	// counters, the vhost workers; the rings are not counted (NoMonitorWhy).
	LibvirtMonitor bool
	// KeepFor is how long Forget keeps the ring counts of a VM with a
	// UUID, for another QEMU process of the same VM (a migration's
	// destination, a restart) to go on with them; 0 is DefaultKeepFor.
	KeepFor time.Duration
}

// Collector reads NICs' counters. It is safe for concurrent use. It holds
// no fd and no QMP connection between calls: only each NIC's ring state
// (cached host addresses of its rings, last 16-bit indices and the
// accumulated counts: its VM's when the VM has a UUID, see continuity.go)
// and each QEMU process's UUID, guarded by mu.
type Collector struct {
	o Options

	mu    sync.Mutex            // guards rings, alias and uuids
	rings map[string]*ringState // by ringKey
	alias map[string]string     // Target.Key() -> ringKey, for Forget
	uuids map[procID]string     // each QEMU process's UUID ("" none), asked once
	// clones are the targets (Target.Key) of QEMUs found to be clones of
	// a VM with the same UUID (cloneOf): they count under their own key.
	clones map[string]bool
}

// NewCollector makes a Collector.
func NewCollector(o Options) *Collector {
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.KeepFor <= 0 {
		o.KeepFor = DefaultKeepFor
	}
	return &Collector{o: o, rings: map[string]*ringState{}, alias: map[string]string{}, uuids: map[procID]string{}, clones: map[string]bool{}}
}

// Forget drops what the Collector keeps about a NIC that is gone. The
// ring counts of a VM with a UUID are kept for Options.KeepFor (not read
// meanwhile), for another QEMU of the same VM to go on with (see
// continuity.go); a Forget of a QEMU whose counts another QEMU of the VM
// has taken over changes nothing.
func (c *Collector) Forget(t Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.alias[t.Key()]
	if !ok {
		key = ringKey(t)
	}
	delete(c.alias, t.Key())
	r := c.rings[key]
	if r == nil {
		return
	}
	if !isVMKey(key) {
		delete(c.rings, key)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.PID > 0 && r.pid != t.PID {
		return // another QEMU of the VM counts them now
	}
	if r.heldSince.IsZero() {
		r.heldSince = c.o.Now()
	}
}

// Collect reads every target; it never fails as a whole: a VM gone or a
// monitor busy is that NIC's Missing entry. The result is in the order of
// ts. Targets of one VM share one QMP connection, dialed and closed
// within the call; VMs are read in parallel. It keeps the last ring
// indices per NIC to accumulate 16-bit wraps, and fills each result's
// Target.UUID (QMP query-uuid, asked once per QEMU process).
func (c *Collector) Collect(ctx context.Context, ts []Target) []NICStats {
	c.prune()
	out := make([]NICStats, len(ts))
	groups := map[string][]int{}
	var order []string
	for i, t := range ts {
		k := vmKey(t)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	// Links first, from the calling goroutine: netlink answers in the
	// network namespace of the thread that opens the socket, and the
	// goroutines below may run on any thread.
	c.readLinks(ts, out)
	scan := &kthreadScan{} // one /proc scan for every VM: vhost kernel threads (before Linux 6.4), QEMUs
	if len(order) == 1 {
		// One VM: no goroutine, so its monitor is dialed from the calling
		// thread too (qemuproc names a busy monitor's holder through
		// sock_diag, which answers per network namespace).
		c.collectVM(ctx, ts, groups[order[0]], out, scan)
		return out
	}
	var wg sync.WaitGroup
	for _, k := range order {
		idx := groups[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.collectVM(ctx, ts, idx, out, scan)
		}()
	}
	wg.Wait()
	return out
}

// vmKey groups targets that share a QEMU (and so a QMP connection).
func vmKey(t Target) string {
	switch {
	case t.QMP != "":
		return "qmp:" + t.QMP
	case t.PID > 0:
		return "pid:" + strconv.Itoa(t.PID)
	}
	return "vm:" + t.VM
}

// collectVM reads the targets idx of one VM into out.
func (c *Collector) collectVM(ctx context.Context, ts []Target, idx []int, out []NICStats, scan *kthreadScan) {
	vctx, cancel := context.WithTimeout(ctx, c.o.Deadline*time.Duration(len(idx)))
	defer cancel()
	sess := c.openSession(vctx, ts[idx[0]], scan)
	defer sess.close()
	uuid := c.vmUUID(vctx, sess, ts[idx[0]])
	for _, i := range idx {
		out[i].Target.UUID = uuid
	}
	workers := assignWorkers(ts, idx, c.o.Now, scan)
	for _, i := range idx {
		nctx, ncancel := context.WithTimeout(vctx, c.o.Deadline)
		c.readNIC(nctx, sess, &out[i], workers[i])
		c.libvirtLink(nctx, sess, &out[i])
		out[i].Tainted = sess.tainted
		ncancel()
		out[i].Time = c.o.Now()
	}
}

// readLinks reads each target's host link into out (and sets Target).
func (c *Collector) readLinks(ts []Target, out []NICStats) {
	h, herr := netlink.NewHandle(unix.NETLINK_ROUTE)
	if herr == nil {
		defer h.Close()
	}
	for i, t := range ts {
		s := &out[i]
		s.Target = t
		switch {
		case t.Link == "" && t.Backend == policy.BackendVDPA:
			s.missing(SourceLink, "a vdpa NIC has no host link")
		case t.Link == "":
			s.missing(SourceLink, "no host link is known for this NIC (a user-mode or vhost-user netdev, or a tap whose name QEMU's fdinfo did not give)")
		case herr != nil:
			s.missing(SourceLink, fmt.Sprintf("rtnetlink: %v", herr))
		default:
			if l, err := readLink(h, t.Link, t.Ifindex); err != nil {
				s.missing(SourceLink, err.Error())
			} else {
				s.Link, s.LinkTime = l, c.o.Now()
			}
		}
	}
}

// readNIC fills s from every source.
func (c *Collector) readNIC(ctx context.Context, sess *session, s *NICStats, w workerResult) {
	c.readRings(ctx, sess, s)
	if s.Target.Backend == policy.BackendVhostNet {
		if w.why != "" {
			s.missing(SourceVhost, w.why)
		}
		s.Workers = w.workers
		if len(w.workers) > 0 {
			s.WorkersTime = w.at
		}
	}
	c.readVDPA(ctx, s)
}
