package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/policy"
)

// fakeProc writes stat files under a temporary procRoot: path (relative)
// -> comm, ppid, utime, stime, starttime.
func fakeProc(t *testing.T, files map[string][5]any) {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s (%s) S %d 0 0 0 -1 4210752 0 0 0 0 %d %d 0 0 20 0 1 0 %d 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
			filepath.Base(filepath.Dir(full)), v[0], v[1], v[2], v[3], v[4])
		if err := os.WriteFile(full, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
}

// TestAssignWorkers: vhost workers (6.4+ threads of QEMU, older kernel
// threads) found in /proc and attributed to NICs and pairs in creation
// and attach order, or refused with the reason.
func TestAssignWorkers(t *testing.T) {
	fakeProc(t, map[string][5]any{
		"100/task/100/stat": {"qemu-system-x86", 1, 500, 100, 5},
		"100/task/104/stat": {"vhost-100", 1, 0, 300, 20}, // NIC b, pair 1 (created last)
		"100/task/101/stat": {"vhost-100", 1, 0, 150, 10}, // NIC a, pair 0
		"100/task/102/stat": {"vhost-100", 1, 0, 0, 10},   // NIC a, pair 1
		"100/task/103/stat": {"vhost-100", 1, 0, 7, 20},   // NIC b, pair 0
		"100/stat":          {"qemu-system-x86", 1, 500, 100, 5},
		// Before 6.4: kernel threads named after the owner's thread.
		"200/task/200/stat": {"qemu-system-x86", 1, 0, 0, 5},
		"200/task/201/stat": {"qemu-system-x86", 1, 0, 0, 6},
		"200/stat":          {"qemu-system-x86", 1, 0, 0, 5},
		"300/stat":          {"vhost-201", 2, 0, 250, 30},
		"301/stat":          {"vhost-999", 2, 0, 1, 30}, // another process's
	})
	t0 := time.Unix(1000, 0)
	a := Target{NIC: "a", PID: 100, Backend: policy.BackendVhostNet, QueuePairs: 2, Attached: t0}
	b := Target{NIC: "b", PID: 100, Backend: policy.BackendVhostNet, QueuePairs: 2, Attached: t0.Add(time.Second)}
	u := Target{NIC: "u", PID: 100, Backend: policy.BackendUserspace}
	got := assignWorkers([]Target{b, u, a}, []int{0, 1, 2}, time.Now, &kthreadScan{})
	want := map[int]string{
		0: "[{0 103 vhost-100 0.07} {1 104 vhost-100 3}]",
		2: "[{0 101 vhost-100 1.5} {1 102 vhost-100 0}]",
	}
	for i, w := range want {
		if g := fmt.Sprint(got[i].workers); g != w || got[i].why != "" {
			t.Errorf("target %d: %s (%q), want %s", i, g, got[i].why, w)
		}
	}
	if _, ok := got[1]; ok {
		t.Errorf("a userspace NIC got workers: %+v", got[1])
	}
	// Without attach times two NICs cannot be told apart.
	b.Attached = time.Time{}
	got = assignWorkers([]Target{a, b}, []int{0, 1}, time.Now, &kthreadScan{})
	if !strings.Contains(got[1].why, "attach order") || got[0].workers != nil {
		t.Errorf("undated: %+v", got)
	}
	// More workers than pairs: something else owns vhost devices.
	got = assignWorkers([]Target{a}, []int{0}, time.Now, &kthreadScan{})
	if !strings.Contains(got[0].why, "has 4 vhost workers for the 2 queue pairs") {
		t.Errorf("mismatch: %+v", got)
	}
	// Kernel threads (before 6.4).
	k := Target{NIC: "k", PID: 200, Backend: policy.BackendVhostNet, QueuePairs: 1}
	got = assignWorkers([]Target{k}, []int{0}, time.Now, &kthreadScan{})
	if fmt.Sprint(got[0].workers) != "[{0 300 vhost-201 2.5}]" {
		t.Errorf("kernel thread: %+v", got[0])
	}
	// Gone.
	k.PID = 400
	got = assignWorkers([]Target{k}, []int{0}, time.Now, &kthreadScan{})
	if !strings.Contains(got[0].why, "VM gone") {
		t.Errorf("gone: %+v", got[0])
	}
}

// TestKernelThreadScanOnce: before Linux 6.4 the vhost workers are
// kernel threads found by scanning /proc: one collection of several VMs
// scans it once, not once per VM.
func TestKernelThreadScanOnce(t *testing.T) {
	fakeProc(t, map[string][5]any{
		"200/task/200/stat": {"qemu-system-x86", 1, 0, 0, 5},
		"200/stat":          {"qemu-system-x86", 1, 0, 0, 5},
		"210/task/210/stat": {"qemu-system-x86", 1, 0, 0, 5},
		"210/stat":          {"qemu-system-x86", 1, 0, 0, 5},
		"220/task/220/stat": {"qemu-system-x86", 1, 0, 0, 5},
		"220/stat":          {"qemu-system-x86", 1, 0, 0, 5},
		"300/stat":          {"vhost-200", 2, 0, 250, 30},
		"310/stat":          {"vhost-210", 2, 0, 250, 30},
		"320/stat":          {"vhost-220", 2, 0, 250, 30},
	})
	scan := &kthreadScan{}
	for _, pid := range []int{200, 210, 220} {
		ts := []Target{{NIC: "n", PID: pid, Backend: policy.BackendVhostNet, QueuePairs: 1}}
		if got := assignWorkers(ts, []int{0}, time.Now, scan)[0]; len(got.workers) != 1 || got.workers[0].TID != pid+100 {
			t.Errorf("pid %d: %+v", pid, got)
		}
	}
	if scan.scans != 1 {
		t.Errorf("/proc scanned %d times for three VMs, want once", scan.scans)
	}
}
