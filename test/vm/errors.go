package vm

import (
	"fmt"
	"strings"
	"time"
)

// TimeoutError: the guest did not finish within the run's timeout; QEMU
// was killed.
type TimeoutError struct {
	After   time.Duration
	Console string // last lines of the guest's console
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("vm: timeout: the guest command did not finish within %s and the VM was killed "+
		"(a hang in the test, or a timeout too short for TCG; raise NETCTL_VM_TIMEOUT)%s", e.After, tail("console", e.Console))
}

// FrozenError: the guest's heartbeat (its init writes its uptime every
// 5 s) stopped for longer than RunOptions.FreezeAfter, long before the
// run's timeout: its vCPUs no longer run userspace. QEMU was killed.
type FrozenError struct {
	After    time.Duration // how long without a beat
	LastBeat string        // the guest's uptime at its last beat, "" if none came
	Console  string
}

func (e *FrozenError) Error() string {
	last := "no beat at all since QEMU started"
	if e.LastBeat != "" {
		last = "the last at " + e.LastBeat + " s of guest uptime"
	}
	return fmt.Sprintf("vm: the guest froze: no heartbeat for %s (%s) and the VM was killed; "+
		"a nested KVM guest on a 1-vCPU VM starves it (smp=2 in testdata/netctl-vm.conf), "+
		"otherwise read the console for a lockup%s", e.After, last, tail("console", e.Console))
}

// PanicError: the guest kernel panicked (or oopsed: the VM boots with
// oops=panic).
type PanicError struct {
	Message string // the "Kernel panic - not syncing: ..." line
	Console string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("vm: guest kernel panic: %s%s", e.Message, tail("console", e.Console))
}

// QEMUError: QEMU itself failed (bad arguments, missing files, no KVM).
type QEMUError struct {
	Status int
	Stderr string
}

func (e *QEMUError) Error() string {
	return fmt.Sprintf("vm: qemu failed (exit status %d); is qemu-system-x86 installed (make vm-deps)?%s", e.Status, tail("qemu stderr", e.Stderr))
}

// NoStatusError: the guest stopped without reporting an exit status, for
// example because init died or the command powered the VM off.
type NoStatusError struct {
	Status  int
	Console string
}

func (e *NoStatusError) Error() string {
	return fmt.Sprintf("vm: the guest stopped without reporting an exit status (qemu status %d): "+
		"init died or something powered the VM off%s", e.Status, tail("console", e.Console))
}

// ConsoleTail is the last lines of the run's console, under a heading, as
// the harness's errors show them ("" for an empty console).
func (r *Result) ConsoleTail() string { return tail("console", r.Console) }

func tail(what, s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "\n--- last " + what + " lines ---\n" + strings.Join(lines, "\n")
}
