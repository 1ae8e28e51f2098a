package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/qmp"
	"github.com/netctl/netctl/state"
)

// GCRequest says which state directory netctl gc cleans, and how.
type GCRequest struct {
	StateDir string // "" is state.DefaultDir
	// DryRun reports what gc would do and changes nothing (no VM's lock
	// is taken, no file created or removed, nothing deleted).
	DryRun bool
	Host   Host // nil: RealHost
	// CheckTimeout bounds the QMP check of each running QEMU (default 2 s).
	CheckTimeout time.Duration
	// LockWait is how long gc waits for a VM's lock, held by an attach or
	// detach on it, before it leaves that VM's records alone (default 5 s).
	LockWait time.Duration
	// RunningSockets lists the QMP sockets of the QEMUs running now; a
	// lock file of one of them is kept. nil: qemuproc.List.
	RunningSockets func() ([]string, error)
	// Sockets, when set, limits gc to the records and lock files of the
	// QEMUs at these QMP sockets (netctl migrate finish collects its
	// source's NICs, and leaves every other VM's to netctl gc).
	Sockets []string
}

// Verdicts: what gc found for a record.
const (
	GCQEMUGone   = "qemu-gone"   // the recorded QEMU exited (pid gone, or another process's start time)
	GCNICGone    = "nic-gone"    // QEMU runs but has neither the device nor the netdev
	GCNetdevLeft = "netdev-left" // QEMU released the device but still has the netdev: detach finishes it
	GCInUse      = "in-use"      // QEMU has the NIC
	GCUnknown    = "unknown"     // QEMU could not be asked (Why says why)
	// GCAttachInterrupted: the record is an attach's intent (status
	// attaching) and nobody holds the VM's lock: the attach was killed
	// before it finished; gc undoes what it left, in QEMU and on the host.
	GCAttachInterrupted = "attach-interrupted"
)

// Actions: what gc did with a record or lock file.
const (
	GCRemoved     = "removed"
	GCWouldRemove = "would-remove" // --dry-run
	GCKept        = "kept"
	GCFailed      = "failed" // cleaning up failed; the record stays (Error says why)
)

// Collected is one record and what gc did with it.
type Collected struct {
	VM      string `json:"vm"`
	ID      string `json:"id"`
	QMP     string `json:"qmp"`
	QEMUPID int    `json:"qemu_pid"`
	Verdict string `json:"verdict"`
	Why     string `json:"why"`
	Action  string `json:"action"`
	// Done says what was (or, with --dry-run, would be) done, one entry
	// per thing: "deleted macvtap nctlmv0", "left tap tap9 alone (netctl
	// did not create it)", "removed the record".
	Done  []string `json:"done,omitempty"`
	Error string   `json:"error,omitempty"`
}

// GCLock is one lock file and what gc did with it.
type GCLock struct {
	Key    string `json:"key"`
	File   string `json:"file"`
	Action string `json:"action"`
	Why    string `json:"why"`
}

// GCResult is everything gc looked at.
type GCResult struct {
	NICs  []Collected `json:"nics"`
	Locks []GCLock    `json:"locks"`
	// Unreadable are record files gc could not read (each error names its
	// file); gc leaves them alone.
	Unreadable []string `json:"unreadable,omitempty"`
}

// GC cleans up after VMs that are gone: for every record whose QEMU has
// exited (pid and start time no longer match), or whose running QEMU has
// neither the NIC's device nor its netdev any more, it deletes what
// netctl created for the NIC (a macvtap, a tap that is still there, a
// vdpa device; each only if it is still the same link or device) and
// removes the record. Records of NICs a running QEMU still has are kept,
// and so is everything netctl did not create. Each VM's records are
// handled under its lock, so gc never races an attach or detach on it.
//
// Then it removes the lock files (locks/) of VMs that are gone: no record
// left for the socket, no running QEMU on it, and nobody holding the
// lock (state.RemoveLock, which is safe against a concurrent Lock).
//
// The result says per record and per lock file what was done. The error
// is non-nil when the state directory cannot be read, or when cleaning up
// some record failed (that record stays, with the reason; run gc again).
func GC(ctx context.Context, r GCRequest) (*GCResult, error) {
	if r.CheckTimeout <= 0 {
		r.CheckTimeout = 2 * time.Second
	}
	if r.LockWait <= 0 {
		r.LockWait = 5 * time.Second
	}
	if r.Host == nil {
		r.Host = RealHost{}
	}
	if r.RunningSockets == nil {
		r.RunningSockets = runningSockets
	}
	if r.DryRun {
		// Open would make the directories: a dry run changes nothing.
		dir := r.StateDir
		if dir == "" {
			dir = state.DefaultDir
		}
		if _, err := os.Stat(filepath.Join(dir, "nics")); errors.Is(err, os.ErrNotExist) {
			return &GCResult{NICs: []Collected{}, Locks: []GCLock{}}, nil
		}
	}
	store, err := state.Open(r.StateDir)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	recs, bad, err := store.List("")
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	res := &GCResult{NICs: []Collected{}, Locks: []GCLock{}}
	for _, b := range bad {
		res.Unreadable = append(res.Unreadable, b.Error())
	}
	// One VM (QMP socket) at a time, in the order of the records.
	var socks []string
	bySock := map[string][]*state.NIC{}
	for _, n := range recs {
		if n.Libvirt != nil {
			// libvirt owns the domain's QEMU: its NICs go through libvirt
			// (netctl detach, or the hook's release when it stops).
			res.NICs = append(res.NICs, Collected{VM: n.VM, ID: n.ID, QMP: n.QMP, QEMUPID: n.QEMUPID, Verdict: GCUnknown, Action: GCKept,
				Why: "a NIC of libvirt domain " + n.Libvirt.UUID + ": netctl detach --vm " + n.Libvirt.UUID + " --id " + n.ID +
					" removes it, and the hook's release does when the domain stops; gc leaves libvirt's domains alone"})
			continue
		}
		if r.Sockets != nil && !slices.Contains(r.Sockets, n.QMP) {
			continue
		}
		if _, ok := bySock[n.QMP]; !ok {
			socks = append(socks, n.QMP)
		}
		bySock[n.QMP] = append(bySock[n.QMP], n)
	}
	netns, _ := state.NetNS() // 0: unknown, no check
	var errs []error
	for _, sock := range socks {
		cs := gcVM(ctx, r, store, netns, sock, bySock[sock])
		for _, c := range cs {
			if c.Error != "" {
				errs = append(errs, fmt.Errorf("%s on %s: %s", c.ID, vmLabel(c.VM, c.QMP), c.Error))
			}
		}
		res.NICs = append(res.NICs, cs...)
	}
	res.Locks = gcLocks(r, store, res.NICs)
	if len(errs) > 0 {
		return res, fmt.Errorf("gc: %d record(s) could not be cleaned up (they stay; run netctl gc again): %w", len(errs), errors.Join(errs...))
	}
	return res, nil
}

func vmLabel(vm, sock string) string {
	if vm != "" {
		return vm
	}
	return sock
}

// gcVM handles the records of the VM behind one QMP socket, under its
// lock (not taken for a dry run).
func gcVM(ctx context.Context, r GCRequest, store *state.Store, netns uint64, sock string, nics []*state.NIC) []Collected {
	out := make([]Collected, 0, len(nics))
	if !r.DryRun {
		lctx, cancel := context.WithTimeout(ctx, r.LockWait)
		lock, err := store.Lock(lctx, state.LockKey(sock))
		cancel()
		if err != nil {
			for _, n := range nics {
				out = append(out, Collected{VM: n.VM, ID: n.ID, QMP: n.QMP, QEMUPID: n.QEMUPID, Verdict: GCUnknown, Action: GCKept,
					Why: "could not take the VM's lock (" + err.Error() + "): left alone; run netctl gc again"})
			}
			return out
		}
		defer lock.Unlock()
	}
	var q *liveQEMU // asked once, when some record's QEMU runs
	for _, old := range nics {
		n := old
		if !r.DryRun {
			// Read again under the lock: a detach may have finished it.
			cur, err := store.Load(old.Key(), old.ID)
			if errors.Is(err, state.ErrNotFound) {
				continue
			}
			if err != nil {
				out = append(out, Collected{VM: old.VM, ID: old.ID, QMP: old.QMP, QEMUPID: old.QEMUPID, Verdict: GCUnknown, Action: GCKept, Why: err.Error()})
				continue
			}
			n = cur
		}
		c := Collected{VM: n.VM, ID: n.ID, QMP: n.QMP, QEMUPID: n.QEMUPID}
		var conn *qmp.Client
		if state.SameProcess(n.QEMUPID, n.QEMUStart) {
			if q == nil {
				q = askQEMU(ctx, sock, r.CheckTimeout)
				if q.c != nil {
					defer q.c.Close()
				}
			}
			c.Verdict, c.Why = q.verdict(n)
			conn = q.c
		} else {
			c.Verdict, c.Why = GCQEMUGone, fmt.Sprintf("QEMU pid %d has exited", n.QEMUPID)
		}
		if c.Verdict != GCQEMUGone && c.Verdict != GCNICGone && c.Verdict != GCAttachInterrupted {
			c.Action = GCKept
			out = append(out, c)
			continue
		}
		if r.DryRun && n.Status == state.StatusAttaching {
			c.Why += " (unless an attach on this VM is running now: --dry-run takes no lock to tell)"
		}
		if n.NetNS != 0 && netns != 0 && n.NetNS != netns && (n.Tap != nil || n.Macvtap != nil) {
			// Its link is in that namespace; one here with the same name
			// and ifindex is another link.
			c.Action = GCKept
			c.Why += fmt.Sprintf("; but netctl attached it from another network namespace (net:[%d]), where its link is: "+
				"run netctl gc there (ip netns exec NAME netctl gc), or remove its record under %s if that namespace is gone",
				n.NetNS, filepath.Join(store.Dir, "nics"))
			out = append(out, c)
			continue
		}
		if n.Status == state.StatusAttaching {
			if conn != nil && c.Verdict == GCAttachInterrupted {
				done, err := undoInterruptedQEMU(ctx, conn, q.devices, n, r.DryRun)
				c.Done = append(c.Done, done...)
				if err != nil {
					c.Action, c.Error = GCFailed, err.Error()+" (the record stays)"
					out = append(out, c)
					continue
				}
			}
			if note := resolveIntent(r.Host, n); note != "" {
				c.Done = append(c.Done, note)
			}
			if note := vdpaInOtherRecord(store, n); note != "" {
				c.Done = append(c.Done, note)
			}
		}
		done, failed := collect(ctx, r, store, conn, n)
		c.Done, c.Error = append(c.Done, done...), failed
		switch {
		case c.Error != "":
			c.Action = GCFailed
		case r.DryRun:
			c.Action = GCWouldRemove
		default:
			c.Action = GCRemoved
		}
		out = append(out, c)
	}
	return out
}

// liveQEMU is what a running QEMU said about its NICs.
type liveQEMU struct {
	c       *qmp.Client // open while gc handles this VM
	pid     int
	devices map[string]bool
	netdevs map[string]bool
	err     error
}

func askQEMU(ctx context.Context, sock string, timeout time.Duration) *liveQEMU {
	q := &liveQEMU{}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dialQMP(ctx, sock)
	if err != nil {
		q.err = err
		return q
	}
	if q.pid, q.err = c.PeerPID(); q.err == nil {
		if q.devices, q.err = deviceIDs(ctx, c); q.err == nil {
			q.netdevs, q.err = netdevIDs(ctx, c)
		}
	}
	if q.err != nil {
		c.Close()
		return q
	}
	q.c = c
	return q
}

// verdict says whether the running QEMU still has NIC n.
func (q *liveQEMU) verdict(n *state.NIC) (string, string) {
	switch {
	case q.err != nil:
		return GCUnknown, fmt.Sprintf("QEMU pid %d runs but could not be asked (%v): left alone", n.QEMUPID, q.err)
	case q.pid != n.QEMUPID:
		return GCUnknown, fmt.Sprintf("QEMU pid %d runs, but pid %d serves its QMP socket now: left alone (once QEMU pid %d has stopped, netctl gc cleans it up)", n.QEMUPID, q.pid, n.QEMUPID)
	case n.Status == state.StatusAttaching:
		return GCAttachInterrupted, fmt.Sprintf("an attach of %s to QEMU pid %d was interrupted before it finished (its record says attaching and nobody holds the VM's lock)", n.ID, n.QEMUPID)
	case q.devices[n.ID]:
		return GCInUse, fmt.Sprintf("QEMU pid %d has device %s", n.QEMUPID, n.ID)
	case q.netdevs[n.Netdev]:
		return GCNetdevLeft, fmt.Sprintf("QEMU pid %d released device %s but still has netdev %s: run netctl detach --id %s to finish", n.QEMUPID, n.ID, n.Netdev, n.ID)
	}
	return GCNICGone, fmt.Sprintf("QEMU pid %d runs but has neither device %s nor netdev %s", n.QEMUPID, n.ID, n.Netdev)
}

// collect deletes what netctl created for NIC n and removes its record
// (with DryRun: says what it would do). c is the connection to n's QEMU
// when it still runs (its fdsets are removed), else nil.
func collect(ctx context.Context, r GCRequest, store *state.Store, c *qmp.Client, n *state.NIC) (done []string, failed string) {
	verb := func(past, would string) string {
		if r.DryRun {
			return would
		}
		return past
	}
	var errs []error
	if c != nil {
		for _, set := range n.FDSets {
			if !r.DryRun {
				if err := c.Run(ctx, "remove-fd", map[string]any{"fdset-id": set}, nil); err != nil && !strings.Contains(err.Error(), "not found") {
					errs = append(errs, fmt.Errorf("remove-fd fdset-id=%d: %w", set, err))
					continue
				}
			}
			done = append(done, fmt.Sprintf("%s fdset %d in QEMU", verb("removed", "would remove"), set))
		}
	}
	for _, l := range []struct {
		kind string
		link *state.Link
	}{{"tap", n.Tap}, {"macvtap", n.Macvtap}} {
		switch {
		case l.link == nil:
		case !l.link.Created:
			done = append(done, fmt.Sprintf("left %s %s alone (netctl did not create it)", l.kind, l.link.Name))
		case hostnic.NotCreatedLink(l.kind, l.link) != "":
			done = append(done, fmt.Sprintf("left %s %s alone (%s)", l.kind, l.link.Name, hostnic.NotCreatedLink(l.kind, l.link)))
		case !r.Host.LinkExists(l.link.Name, l.link.Ifindex):
			done = append(done, fmt.Sprintf("%s %s is already gone", l.kind, l.link.Name))
		default:
			if !r.DryRun {
				if err := r.Host.DeleteLink(l.link.Name, l.link.Ifindex); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			done = append(done, fmt.Sprintf("%s %s %s", verb("deleted", "would delete"), l.kind, l.link.Name))
		}
	}
	if v := n.VDPA; v != nil {
		if !v.Created {
			done = append(done, fmt.Sprintf("left vdpa device %s alone (netctl did not create it)", v.Name))
		} else if why := hostnic.NotCreatedVDPA(v); why != "" {
			done = append(done, fmt.Sprintf("left vdpa device %s alone (%s)", v.Name, why))
		} else if err := dryOr(r.DryRun, func() error { return r.Host.DeleteVDPA(ctx, v.Name) }); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, fmt.Sprintf("%s vdpa device %s", verb("deleted", "would delete"), v.Name))
		}
	}
	if len(errs) > 0 {
		return done, errors.Join(errs...).Error() + " (the record stays)"
	}
	if !r.DryRun {
		if err := store.Remove(n.Key(), n.ID); err != nil {
			return done, err.Error()
		}
	}
	return append(done, verb("removed the record", "would remove the record")), ""
}

// dryOr runs fn unless dry.
func dryOr(dry bool, fn func() error) error {
	if dry {
		return nil
	}
	return fn()
}

// gcLocks removes the lock files of VMs that are gone: no record kept for
// the socket and no running QEMU on it. A lock someone holds stays.
func gcLocks(r GCRequest, store *state.Store, nics []Collected) []GCLock {
	out := []GCLock{}
	keys, err := store.LockKeys()
	if err != nil {
		return append(out, GCLock{File: filepath.Join(store.Dir, "locks"), Action: GCKept, Why: err.Error()})
	}
	if r.Sockets != nil {
		keys = slices.DeleteFunc(keys, func(k string) bool {
			return !slices.ContainsFunc(r.Sockets, func(s string) bool { return state.LockKey(s) == k })
		})
	}
	if len(keys) == 0 {
		return out
	}
	inUse := map[string]string{}
	recs, bad, err := store.List("")
	if err != nil || len(bad) > 0 {
		why := "some records could not be read: which VMs they belong to is unknown"
		if err != nil {
			why = err.Error()
		}
		for _, k := range keys {
			out = append(out, GCLock{Key: k, File: lockFile(store, k), Action: GCKept, Why: why})
		}
		return out
	}
	removing := map[string]bool{} // dry run: records gc would remove
	for _, c := range nics {
		if c.Action == GCWouldRemove {
			removing[c.QMP+"\x00"+c.ID] = true
		}
	}
	for _, n := range recs {
		if !removing[n.QMP+"\x00"+n.ID] {
			inUse[state.LockKey(n.QMP)] = "netctl has a record of a NIC on this VM"
		}
	}
	running, err := r.RunningSockets()
	if err != nil {
		for _, k := range keys {
			out = append(out, GCLock{Key: k, File: lockFile(store, k), Action: GCKept, Why: "cannot tell which QEMUs run: " + err.Error()})
		}
		return out
	}
	for _, s := range running {
		if _, ok := inUse[state.LockKey(s)]; !ok {
			inUse[state.LockKey(s)] = "a running QEMU serves QMP on " + s
		}
	}
	// The libvirt hook's per-domain locks (state.DomainLockKey) share the
	// directory: one of a domain the hook has a record of stays.
	doms, dbad, derr := store.ListDomains()
	hookUnknown := ""
	switch {
	case derr != nil:
		hookUnknown = "the hook's records could not be read (" + derr.Error() + "): which domains are running is unknown"
	case len(dbad) > 0:
		hookUnknown = "some of the hook's records could not be read: which domains they belong to is unknown"
	}
	for _, d := range doms {
		inUse[state.DomainLockKey(d.Name)] = fmt.Sprintf("the libvirt hook has a record of domain %.64q (netctl hook status)", d.Name)
	}
	for _, k := range keys {
		l := GCLock{Key: k, File: lockFile(store, k)}
		hook := strings.HasPrefix(k, "hook-")
		if why, ok := inUse[k]; ok {
			l.Action, l.Why = GCKept, why
			out = append(out, l)
			continue
		}
		if hook && hookUnknown != "" {
			l.Action, l.Why = GCKept, hookUnknown
			out = append(out, l)
			continue
		}
		ok, err := store.RemoveLock(k, r.DryRun)
		switch {
		case err != nil:
			l.Action, l.Why = GCFailed, err.Error()
		case !ok && hook:
			l.Action, l.Why = GCKept, "the libvirt hook holds it now"
		case !ok:
			l.Action, l.Why = GCKept, "an attach or detach holds it now"
		case hook && r.DryRun:
			l.Action, l.Why = GCWouldRemove, "a libvirt hook lock of a domain the hook has no record of, and nobody holds it"
		case hook:
			l.Action, l.Why = GCRemoved, "a libvirt hook lock of a domain the hook had no record of, and nobody held it"
		case r.DryRun:
			l.Action, l.Why = GCWouldRemove, "no record and no running QEMU uses it"
		default:
			l.Action, l.Why = GCRemoved, "no record and no running QEMU used it"
		}
		out = append(out, l)
	}
	return out
}

func lockFile(store *state.Store, key string) string {
	return filepath.Join(store.Dir, "locks", key+".lock")
}

// runningSockets lists the QMP unix sockets of the QEMUs running now, as
// netctl reaches them and as QEMU was given them (absolute).
func runningSockets() ([]string, error) {
	vms, err := qemuproc.List()
	if err != nil {
		return nil, err
	}
	var socks []string
	for _, vm := range vms {
		for _, m := range vm.Monitors {
			if m.Socket != "" {
				socks = append(socks, m.Socket)
			}
			if filepath.IsAbs(m.Path) && !m.Abstract {
				socks = append(socks, m.Path)
			}
		}
	}
	return socks, nil
}
