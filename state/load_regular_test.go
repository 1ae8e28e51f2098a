package state

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLoadOpensNoNonRegular: List and Buses no longer open a
// record name that is not a regular file (a device node's open can reset
// its device), but Load (detach, attach's re-attach) still opens one: a
// FIFO put under a record's name is opened (a writer blocked in open(2)
// wakes up). The same holds for a vhost-vdpa node put there.
func TestLoadOpensNoNonRegular(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := sample().Key()
	p := filepath.Join(s.Dir, "nics", recordName(key, "net0"))
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan int, 1)
	go func() {
		fd, err := unix.Open(p, unix.O_WRONLY, 0) // blocks until a reader opens it
		if err == nil {
			opened <- fd
		}
	}()
	time.Sleep(100 * time.Millisecond) // the writer waits in open(2)
	_, lerr := s.Load(key, "net0")
	select {
	case fd := <-opened:
		unix.Close(fd)
		t.Errorf("Load opened the FIFO %s (error %v): a non-regular record file is opened outside List and Buses", p, lerr)
	case <-time.After(500 * time.Millisecond):
		// not opened: unblock the writer
		if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
			<-opened
			unix.Close(fd)
		}
	}
}
