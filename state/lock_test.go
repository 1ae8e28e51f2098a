package state

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRemoveLock: a held lock is not removed; a free one is (not with
// dryRun); a missing one is no error; LockKeys lists what is there.
func TestRemoveLock(t *testing.T) {
	s, _ := Open(t.TempDir())
	ctx := context.Background()
	l, err := s.Lock(ctx, "sock-a")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RemoveLock("sock-a", false); ok || err != nil {
		t.Errorf("remove a held lock: %v %v", ok, err)
	}
	l.Unlock()
	if keys, err := s.LockKeys(); err != nil || len(keys) != 1 || keys[0] != "sock-a" {
		t.Errorf("lock keys %v %v", keys, err)
	}
	if ok, err := s.RemoveLock("sock-a", true); !ok || err != nil {
		t.Errorf("dry run on a free lock: %v %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "locks", "sock-a.lock")); err != nil {
		t.Errorf("dry run removed the file: %v", err)
	}
	if ok, err := s.RemoveLock("sock-a", false); !ok || err != nil {
		t.Errorf("remove a free lock: %v %v", ok, err)
	}
	if keys, _ := s.LockKeys(); len(keys) != 0 {
		t.Errorf("lock keys after removal %v", keys)
	}
	if ok, err := s.RemoveLock("sock-a", false); ok || err != nil {
		t.Errorf("remove a missing lock: %v %v", ok, err)
	}
	for _, bad := range []string{"", "../x", ".hidden"} {
		if _, err := s.RemoveLock(bad, false); err == nil {
			t.Errorf("RemoveLock(%q) accepted", bad)
		}
	}
}

// TestRemoveLockUnderContention: holders of one VM's lock never overlap
// while another goroutine removes the lock file whenever it is free (the
// race gc must not open: a waiter holding the old, unlinked file while a
// newcomer locks a new one).
func TestRemoveLockUnderContention(t *testing.T) {
	s, _ := Open(t.TempDir())
	ctx := context.Background()
	var inside, maxInside, removed atomic.Int32
	stop := make(chan struct{})
	var remover sync.WaitGroup
	remover.Add(1)
	go func() {
		defer remover.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if ok, err := s.RemoveLock("vm1", false); err != nil {
				t.Error(err)
				return
			} else if ok {
				removed.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 40; j++ {
				l, err := s.Lock(ctx, "vm1")
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	remover.Wait()
	if maxInside.Load() != 1 {
		t.Errorf("%d holders at once", maxInside.Load())
	}
	if removed.Load() == 0 {
		t.Error("the lock file was never free to remove: the test checked nothing")
	}
	t.Logf("lock file removed %d times during 320 lock/unlock cycles", removed.Load())
}
