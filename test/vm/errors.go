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
