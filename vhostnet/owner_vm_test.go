package vhostnet

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// TestVMSetOwnerUnderSignals: SET_OWNER forks vhost's worker from the
// caller (Linux 6.4+), and a signal pending on the calling thread makes
// that fail with ENOMEM. Go signals threads for preemption; here another
// goroutine signals the owner's thread (SIGURG, which Go ignores) as fast
// as it can while devices are set up. None may fail.
func TestVMSetOwnerUnderSignals(t *testing.T) {
	testenv.VM(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid, pid := unix.Gettid(), unix.Getpid()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	var sent atomic.Uint64
	go func() {
		defer wg.Done()
		for !stop.Load() {
			unix.Tgkill(pid, tid, unix.SIGURG)
			sent.Add(1)
		}
	}()
	failed := 0
	const n = 150
	for i := 0; i < n; i++ {
		d, err := Open()
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SetOwner(); err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("setup %d: %v", i, err)
			}
		}
		d.Close()
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d setups, %d failed, %d signals sent to the owner's thread", n, failed, sent.Load())
	if failed > 0 {
		t.Errorf("%d of %d SET_OWNER calls failed while the thread was being signalled", failed, n)
	}
}
