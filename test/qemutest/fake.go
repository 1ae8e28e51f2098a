package qemutest

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// NotQMP serves, until the test ends, a unix socket in a temporary
// directory whose server is not QEMU: it greets each connection with
// greeting (an SSH or SMTP banner, say), keeps the connection open for
// hold, then closes it. It returns the socket's path.
func NotQMP(t testing.TB, greeting string, hold time.Duration) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "not-qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.Write([]byte(greeting))
				select {
				case <-time.After(hold):
				case <-done:
				}
			}()
		}
	}()
	return sock
}

// ListenerFile makes a listening unix socket at path and returns it as a
// file to hand to QEMU in exec.Cmd.ExtraFiles, as libvirt passes its
// monitor (-chardev socket,fd=3,server=on). The caller owns the file and
// closes it once QEMU has started. Closing the listener here unlinks path
// (Go's UnixListener does), so only the inherited fd reaches the socket.
func ListenerFile(t testing.TB, path string) *os.File {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	return f
}
