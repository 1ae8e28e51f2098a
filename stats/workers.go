package stats

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/qemuproc"
)

// procRoot is where procfs is mounted (tests point it at a fake tree).
var procRoot = "/proc"

// maxTasks bounds the directory entries read from one /proc listing.
const maxTasks = 1 << 16

// worker is one vhost worker thread found in /proc.
type worker struct {
	tid  int
	stat taskStat
}

// findWorkers finds the vhost worker threads of process pid: one per
// /dev/vhost-net fd (per queue pair), created at VHOST_SET_OWNER and
// named "vhost-<tid>" after the thread that called it
// (drivers/vhost/vhost.c, vhost_worker_create: "vhost-%d", current->pid).
//
//   - Linux 6.4 and later: a vhost_task, a thread in the owner's own
//     thread group, so in /proc/PID/task (tid and start time identify it).
//   - Before 6.4: a kernel thread (a child of kthreadd, pid 2), found by
//     scanning /proc for "vhost-<tid>" where tid is one of the owner's
//     threads.
//
// They are returned in creation order (start time, then tid), which is
// queue pair order: QEMU (and vhostnet.NewNIC) opens and owns the
// devices pair by pair.
func findWorkers(pid int, scan *kthreadScan) ([]worker, error) {
	tids, err := listPIDs(filepath.Join(procRoot, strconv.Itoa(pid), "task"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("VM gone: QEMU (pid %d) has exited: %w", pid, ErrNotAvailable)
		}
		return nil, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	names := map[string]bool{}
	for _, tid := range tids {
		names["vhost-"+strconv.Itoa(tid)] = true
	}
	var ws []worker
	for _, tid := range tids {
		st, err := readStat(filepath.Join(procRoot, strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))
		if err == nil && strings.HasPrefix(st.Comm, "vhost-") {
			ws = append(ws, worker{tid: tid, stat: st})
		}
	}
	if len(ws) == 0 {
		// Before 6.4: kernel threads named after one of the owner's threads.
		kt, err := scan.threads()
		if err != nil {
			return nil, err
		}
		for name := range names {
			ws = append(ws, kt[name]...)
		}
	}
	slices.SortFunc(ws, func(a, b worker) int {
		if a.stat.StartTime != b.stat.StartTime {
			if a.stat.StartTime < b.stat.StartTime {
				return -1
			}
			return 1
		}
		return a.tid - b.tid
	})
	return ws, nil
}

// maxPIDs bounds the /proc listing of the kernel-thread scan: pid_max's
// ceiling (PID_MAX_LIMIT, 4194304 on 64-bit), so that no pid is missed.
const maxPIDs = 1 << 22

// kthreadScan is the scan of /proc for vhost kernel threads (before
// Linux 6.4), done at most once per collection however many VMs it has:
// each one's stat file is read once.
//
// It also lists the QEMUs (qemuproc.List, another walk of /proc) once
// for the VMs whose monitor the targets do not name.
type kthreadScan struct {
	once  sync.Once
	byOwn map[string][]worker // comm ("vhost-<tid>") -> the kernel threads of that name
	err   error
	scans int // tests

	qemuOnce sync.Once
	vms      []qemuproc.VM
	vmsErr   error
}

// qemus lists the QEMUs on this host, once per collection.
func (k *kthreadScan) qemus() ([]qemuproc.VM, error) {
	k.qemuOnce.Do(func() { k.vms, k.vmsErr = qemuproc.List() })
	return k.vms, k.vmsErr
}

// threads scans /proc (the first call) and returns the vhost kernel
// threads by name.
func (k *kthreadScan) threads() (map[string][]worker, error) {
	k.once.Do(func() {
		k.scans++
		all, err := listN(procRoot, maxPIDs)
		if err != nil {
			k.err = fmt.Errorf("scan %s: %w", procRoot, err)
			return
		}
		k.byOwn = map[string][]worker{}
		for _, p := range all {
			st, err := readStat(filepath.Join(procRoot, strconv.Itoa(p), "stat"))
			if err == nil && st.PPID == 2 && strings.HasPrefix(st.Comm, "vhost-") {
				k.byOwn[st.Comm] = append(k.byOwn[st.Comm], worker{tid: p, stat: st})
			}
		}
	})
	return k.byOwn, k.err
}

// listPIDs lists the numeric entries of a /proc directory (bounded).
func listPIDs(dir string) ([]int, error) { return listN(dir, maxTasks) }

// listN lists at most n numeric entries of a /proc directory.
func listN(dir string, n int) ([]int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []int
	for len(out) < n {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				out = append(out, v)
			}
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readStat reads and parses a stat file (bounded).
func readStat(path string) (taskStat, error) {
	f, err := os.Open(path)
	if err != nil {
		return taskStat{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStat+1))
	if err != nil {
		return taskStat{}, err
	}
	return parseStat(b)
}

// workerResult is one NIC's workers, or why there are none.
type workerResult struct {
	workers []WorkerStats
	at      time.Time // when their stat files were read
	why     string
}

// assignWorkers finds the vhost workers of the QEMU that the targets idx
// share and says which are whose. Workers do not say which device they
// serve; they are created at VHOST_SET_OWNER, which QEMU does at
// netdev_add, pair by pair. So with one vhost-net NIC its pairs are the
// workers in creation order; with several, they are attributed in attach
// order (Target.Attached, from netctl's records) when every such NIC has
// one and the workers are exactly as many as their pairs; otherwise each
// NIC says why not.
func assignWorkers(ts []Target, idx []int, now func() time.Time, scan *kthreadScan) map[int]workerResult {
	out := map[int]workerResult{}
	var vh []int
	for _, i := range idx {
		if ts[i].Backend == policy.BackendVhostNet {
			vh = append(vh, i)
		}
	}
	if len(vh) == 0 {
		return out
	}
	fail := func(why string) map[int]workerResult {
		for _, i := range vh {
			out[i] = workerResult{why: why}
		}
		return out
	}
	pid := ts[vh[0]].PID
	if pid <= 0 {
		return fail("QEMU's pid is not known")
	}
	ws, err := findWorkers(pid, scan)
	if err != nil {
		return fail(err.Error())
	}
	at := now()
	pairs := 0
	dated := true
	for _, i := range vh {
		pairs += max(ts[i].QueuePairs, 1)
		dated = dated && !ts[i].Attached.IsZero()
	}
	switch {
	case len(ws) == 0:
		return fail(fmt.Sprintf("no vhost worker thread found for QEMU (pid %d): its vhost devices have no owner yet", pid))
	case len(ws) != pairs:
		return fail(fmt.Sprintf("QEMU (pid %d) has %d vhost workers for the %d queue pairs of its %d vhost-net NIC(s) here (another vhost device, such as vhost-vsock, or a NIC netctl did not attach?): cannot tell which serves which pair",
			pid, len(ws), pairs, len(vh)))
	case len(vh) > 1 && !dated:
		return fail(fmt.Sprintf("QEMU (pid %d) has %d vhost-net NICs and the workers do not say which device each serves; netctl attributes them in attach order, which only its own records give",
			pid, len(vh)))
	}
	slices.SortStableFunc(vh, func(a, b int) int { return ts[a].Attached.Compare(ts[b].Attached) })
	next := 0
	for _, i := range vh {
		n := max(ts[i].QueuePairs, 1)
		r := workerResult{at: at}
		for p, w := range ws[next : next+n] {
			r.workers = append(r.workers, WorkerStats{Pair: p, TID: w.tid, Comm: w.stat.Comm, CPUSeconds: w.stat.CPUSeconds()})
		}
		next += n
		out[i] = r
	}
	return out
}
