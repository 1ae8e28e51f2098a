package stats

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/netctl/netctl/policy"
)

// ProcRoot is where procfs is mounted (tests point it elsewhere).
var ProcRoot = "/proc"

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
func findWorkers(pid int) ([]worker, error) {
	tids, err := listPIDs(filepath.Join(ProcRoot, strconv.Itoa(pid), "task"))
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
		st, err := readStat(filepath.Join(ProcRoot, strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))
		if err == nil && strings.HasPrefix(st.Comm, "vhost-") {
			ws = append(ws, worker{tid: tid, stat: st})
		}
	}
	if len(ws) == 0 {
		// Before 6.4: kernel threads named after one of the owner's threads.
		all, err := listPIDs(ProcRoot)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", ProcRoot, err)
		}
		for _, p := range all {
			st, err := readStat(filepath.Join(ProcRoot, strconv.Itoa(p), "stat"))
			if err == nil && st.PPID == 2 && names[st.Comm] {
				ws = append(ws, worker{tid: p, stat: st})
			}
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

// listPIDs lists the numeric entries of a /proc directory (bounded).
func listPIDs(dir string) ([]int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []int
	for len(out) < maxTasks {
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

// readWorkers fills s.Workers for a vhost-net NIC. vhostNICs is how many
// vhost-net NICs the same QEMU has in this collection: the workers do
// not say which device they serve, so they are attributed only when there
// is one.
func (c *Collector) readWorkers(s *NICStats, vhostNICs int) {
	t := s.Target
	if t.Backend != policy.BackendVhostNet {
		return
	}
	if t.PID <= 0 {
		s.missing(SourceVhost, "QEMU's pid is not known")
		return
	}
	ws, err := findWorkers(t.PID)
	if err != nil {
		s.missing(SourceVhost, err.Error())
		return
	}
	switch {
	case len(ws) == 0:
		s.missing(SourceVhost, fmt.Sprintf("no vhost worker thread found for QEMU (pid %d): its vhost devices have no owner yet", t.PID))
		return
	case vhostNICs > 1:
		s.missing(SourceVhost, fmt.Sprintf("QEMU (pid %d) has %d vhost-net NICs and %d vhost workers, which do not say which device each serves: per-NIC worker CPU needs one vhost-net NIC per VM",
			t.PID, vhostNICs, len(ws)))
		return
	case t.QueuePairs > 0 && len(ws) != t.QueuePairs:
		s.missing(SourceVhost, fmt.Sprintf("QEMU (pid %d) has %d vhost workers for %d queue pairs (another vhost device, such as vhost-vsock?): cannot tell which serves which pair",
			t.PID, len(ws), t.QueuePairs))
		return
	}
	for i, w := range ws {
		s.Workers = append(s.Workers, WorkerStats{Pair: i, TID: w.tid, Comm: w.stat.Comm, CPUSeconds: w.stat.CPUSeconds()})
	}
}
