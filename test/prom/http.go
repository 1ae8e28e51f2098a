package prom

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// HTTP makes HTTP requests from one network namespace: the one of the
// thread that called NewHTTP.
type HTTP struct {
	c *http.Client
}

// NewHTTP is an HTTP client whose connections are made in the calling
// thread's network namespace (call it from the test goroutine after
// testenv.Host); the namespace stays open until the test ends.
func NewHTTP(t testing.TB) *HTTP {
	t.Helper()
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return &HTTP{c: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: DialIn(ns), DisableKeepAlives: true}}}
}

// Get gets url and returns its status and body (up to 16 MiB); a request
// that fails is status 0 with the error as the body.
func (h *HTTP) Get(url string) (int, string) {
	resp, err := h.c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b)
}

// DialIn dials from network namespace ns (an http.Transport's
// DialContext): net/http dials on goroutines of its own, whose threads
// may be outside it. Each dial runs on a goroutine that joins ns, stays
// locked and ends, so its thread (in ns) is thrown away.
func DialIn(ns *os.File) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- res{nil, fmt.Errorf("setns: %w", err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}
