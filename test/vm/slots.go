package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSlots is how many VMs may run at once on this machine, across
// every process that shares the cache directory ($NETCTL_VM_SLOTS
// overrides it). TCG guests are CPU-bound: on a 2-core machine a third VM
// only makes the other two slower and their timeouts likelier.
const DefaultSlots = 2

// takeSlot waits until one of the machine's VM slots (flock'd files under
// cache/slots) is free, or ctx is done. The returned function frees it.
// The wait happens before a run's own timeout starts.
func takeSlot(ctx context.Context, cache string) (func(), error) {
	n := DefaultSlots
	if s := os.Getenv("NETCTL_VM_SLOTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 64 {
			return nil, fmt.Errorf("vm: NETCTL_VM_SLOTS=%q: want a number from 1 to 64", s)
		}
		n = v
	}
	dir := filepath.Join(cache, "slots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range files {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		files[i] = f
	}
	for {
		for i, f := range files {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				files[i] = nil // kept open: the lock lives as long as the fd
				return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
			}
			if err != unix.EWOULDBLOCK && err != unix.EINTR {
				return nil, fmt.Errorf("vm: lock slot %s: %w", f.Name(), err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("vm: waiting for one of %d VM slots: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
