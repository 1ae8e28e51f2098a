package vm

import (
	"errors"
	"testing"
)

// TestBootPanic: only a panic before the init's ready line counts as a
// boot panic (retried once); a panic after it, or any other error, is the
// run's result.
func TestBootPanic(t *testing.T) {
	boot := "[    1.93] RIP: 0010:sched_clock_cpu+0x9/0x1d0\n[    1.93] Kernel panic - not syncing: Fatal exception in interrupt\n"
	after := "netctl-vm: ready after 2.1s\n[    9.0] Kernel panic - not syncing: sysrq triggered crash\n"
	p := &PanicError{Message: "Kernel panic - not syncing: Fatal exception in interrupt"}
	for _, c := range []struct {
		err  error
		res  *Result
		want bool
	}{
		{p, &Result{Console: boot}, true},
		{p, &Result{Console: after}, false},
		{p, nil, false},
		{&TimeoutError{}, &Result{Console: boot}, false},
		{errors.New("vm: start qemu: no such file"), &Result{Console: boot}, false},
		{nil, &Result{Console: boot}, false},
	} {
		if got := bootPanic(c.err, c.res); got != c.want {
			t.Errorf("bootPanic(%v, %+v) = %v, want %v", c.err, c.res, got, c.want)
		}
	}
}
