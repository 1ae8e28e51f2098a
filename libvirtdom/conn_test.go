package libvirtdom

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDialDeadline: a socket that accepts but never answers (a daemon
// that hangs) fails Dial at the context's deadline, with the socket named,
// instead of blocking.
func TestDialDeadline(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hang-sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(ctx, "qemu+unix:///system?socket="+sock)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), sock) {
		t.Errorf("Dial of a daemon that never answers: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Dial took %v past a 300 ms deadline", d)
	}
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(time.Second):
		t.Error("the fake daemon never saw the connection")
	}
}
