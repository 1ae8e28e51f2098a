package qemutest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
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
	return serveUnix(t, "not-qmp.sock", func(c net.Conn, done <-chan struct{}) {
		c.Write([]byte(greeting))
		select {
		case <-time.After(hold):
		case <-done:
		}
	})
}

// HungQMP serves, until the test ends, a QMP monitor that greets and
// takes qmp_capabilities but never answers another command: a QEMU whose
// monitor thread greets while its main loop is stuck (QEMU 7.2 runs an
// oob-capable QMP monitor in its own I/O thread). It returns the socket's
// path.
func HungQMP(t testing.TB) string {
	t.Helper()
	return serveUnix(t, "hung.sock", func(c net.Conn, _ <-chan struct{}) {
		fmt.Fprintln(c, `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": ["oob"]}}`)
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "qmp_capabilities") {
				fmt.Fprintln(c, `{"return": {}}`)
			}
			// Anything else: no answer, ever; the client's hang-up (or
			// the test's end) ends it.
		}
	})
}

// serveUnix listens on a unix socket named name in a temporary directory
// and runs serve on each connection in a goroutine of its own until the
// test ends; it returns the socket's path. A connection is closed when
// serve returns or when the test ends (done is closed then, too); the
// test's cleanup closes the listener and waits for every serve.
func serveUnix(t testing.TB, name string, serve func(c net.Conn, done <-chan struct{})) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), name)
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
			served := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				select {
				case <-done:
				case <-served:
				}
				c.Close()
			}()
			go func() {
				defer wg.Done()
				defer close(served)
				serve(c, done)
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
