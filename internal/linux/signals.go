package linux

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// WithSignalsBlocked runs f on a locked OS thread with every signal
// blocked, then restores the thread's mask (pending signals are delivered
// then).
//
// Why: since Linux 6.4 vhost creates its worker with copy_process() in the
// caller's context (vhost_task), and copy_process() gives up when the
// calling thread has a signal pending. Go sends SIGURG to running threads
// for asynchronous preemption, so VHOST_SET_OWNER fails now and then, and
// vhost reports the failure as ENOMEM. Seen on Debian's 6.12.117 with two
// CPUs: about one in sixty setups.
func WithSignalsBlocked(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return f()
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return f()
}
