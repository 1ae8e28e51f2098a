package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readFile is on every record read: it reads to EOF, stops one byte past
// max, refuses a symlink and does not hang on a FIFO put in its place.
func TestReadFileBounds(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 4095, 4096, 4097, 10000, 70000} {
		p := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte{'x'}, size)
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(p, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: read %d bytes, %v", size, len(got), err)
		}
		if size > 4096 {
			got, err = readFile(p, 4096)
			if err != nil || len(got) != 4097 {
				t.Fatalf("size %d, max 4096: read %d bytes (want 4097: one past max), %v", size, len(got), err)
			}
		}
	}
	if _, err := readFile(filepath.Join(dir, "none"), 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v, want ErrNotFound", err)
	}
	if err := os.Symlink(filepath.Join(dir, "f"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := readFile(filepath.Join(dir, "link"), 1<<20); err == nil {
		t.Fatal("a symlink was followed")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readFile(fifo, 10); done <- err }()
	select {
	case err := <-done:
		t.Logf("fifo: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("readFile hung on a FIFO")
	}
}

// List and Buses do not open what is not a regular file under a record's
// name (a device node's open can reset its device): a FIFO there is
// reported bad, and a writer waiting on it is not let through.
func TestListOpensOnlyRegularFiles(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := sample()
	if err := s.Save(n); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(s.Dir, "nics", recordName(n.Key(), "net9"))
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // blocks until a reader opens it
			close(opened)
			f.Close()
		}
	}()
	nics, bad, err := s.List(n.Key())
	if err != nil || len(nics) != 1 || len(bad) != 1 || !strings.Contains(bad[0].Error(), "not a regular file") {
		t.Fatalf("List: %d records, bad %v, %v; want the record and the FIFO reported", len(nics), bad, err)
	}
	if got := s.Buses(n.Key(), n.QEMUPID, n.QEMUStart); len(got) != 0 {
		t.Fatalf("Buses: %v", got)
	}
	select {
	case <-opened:
		t.Fatal("List or Buses opened the FIFO")
	case <-time.After(200 * time.Millisecond):
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0) // let the writer go
	if err == nil {
		<-opened
		r.Close()
	}
}
