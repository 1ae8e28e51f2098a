package stats

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/qemuproc"
)

// TestSampleZombieIsGone: a QEMU killed but not yet reaped (a zombie:
// same pid, same start time, no executable, no memory) is a VM gone,
// not an error: the exporter's reason code is vm_gone. Before the fix
// the read was refused with "not reading the memory of pid N: ... its
// executable: no such file or directory" (reason "error"), as
// TestHostGuestQueues saw after killing its QEMU whenever the harness
// had not reaped it yet.
func TestSampleZombieIsGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	var start uint64
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := readStat("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil && st.State == 'Z' {
			start = st.StartTime
			break
		}
		if time.Now().After(end) {
			t.Fatalf("pid %d never became a zombie: %v", pid, err)
		}
	}
	if st, err := qemuproc.StartTime(pid); err != nil || st != start {
		t.Fatalf("start time of the zombie: %d, %v", st, err)
	}
	r := &ringState{pid: pid, pidStart: start, queues: []ringQueue{{vq: 0, num: 256, avail: 0x1000, used: 0x2000}}}
	err := r.sample(false, time.Now)
	if err == nil || !strings.Contains(err.Error(), "VM gone") {
		t.Errorf("sampling a zombie QEMU: %v; want VM gone", err)
	}
}
