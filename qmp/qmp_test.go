package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeQEMU serves QMP on one end of a socketpair: a greeting, then each
// request is answered by reply (with an event before it); fds sent with
// getfd are recorded.
type fakeQEMU struct {
	conn   *net.UnixConn
	gotFDs chan int
	reqs   chan map[string]any
}

func pair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "qmp")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return mk(fds[0]), mk(fds[1])
}

const greeting72 = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}`

// serve runs a fake QEMU on the server end of a socketpair: it writes
// greeting as is (nothing if empty), then answers each request with the
// lines reply returns, written as is (with "ID" replaced by the request's
// id); a nil answer closes the connection. fds passed with a request are
// recorded.
func serve(t *testing.T, greeting string, reply func(req map[string]any) []string) (*fakeQEMU, *net.UnixConn) {
	server, client := pair(t)
	f := &fakeQEMU{conn: server, gotFDs: make(chan int, 4), reqs: make(chan map[string]any, 1024)}
	go func() {
		defer server.Close()
		if !writeLines(server, []string{greeting}, "", "") {
			return
		}
		for {
			buf := make([]byte, 4096)
			oob := make([]byte, 64)
			n, oobn, _, _, err := server.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				return
			}
			if oobn > 0 {
				msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
				for _, m := range msgs {
					if fds, err := unix.ParseUnixRights(&m); err == nil {
						for _, fd := range fds {
							f.gotFDs <- fd
						}
					}
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				var req map[string]any
				json.Unmarshal([]byte(line), &req)
				select {
				case f.reqs <- req:
				default:
				}
				id, _ := req["id"].(float64)
				answer := reply(req)
				if answer == nil || !writeLines(server, answer, fmt.Sprint(id), fmt.Sprint(id-1)) {
					return
				}
			}
		}
	}()
	return f, client
}

// closeConn, as a line of a fake's answer, closes the connection there;
// pause waits 300 ms.
const (
	closeConn = "\x00close"
	pause     = "\x00pause"
)

// writeLines writes a fake's answer with ID and PREV replaced; false means
// the connection is to be closed.
func writeLines(c *net.UnixConn, lines []string, id, prev string) bool {
	for _, l := range lines {
		switch l {
		case closeConn:
			return false
		case pause:
			time.Sleep(300 * time.Millisecond)
			continue
		}
		l = strings.ReplaceAll(strings.ReplaceAll(l, "PREV", prev), "ID", id)
		if _, err := c.Write([]byte(l)); err != nil {
			return false
		}
	}
	return true
}

// startFake is serve with QEMU 7.2's greeting and an event before every
// reply.
func startFake(t *testing.T, reply func(req map[string]any) string) (*fakeQEMU, *net.UnixConn) {
	return serve(t, greeting72+"\n", func(req map[string]any) []string {
		return []string{
			`{"event": "NIC_RX_FILTER_CHANGED", "data": {"name": "net0"}, "timestamp": {"seconds": 1, "microseconds": 2}}` + "\n",
			reply(req) + "\n",
		}
	})
}

// newClient is New on conn, within d; the client is closed when the test
// ends.
func newClient(t *testing.T, conn *net.UnixConn, d time.Duration) (context.Context, *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	c, err := New(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// vm1 answers as a QEMU named vm1: the handshake, query-name, and
// CommandNotFound for anything else.
func vm1(req map[string]any) string {
	switch req["execute"] {
	case "qmp_capabilities":
		return `{"return": {}, "id": ID}`
	case "query-name":
		return `{"return": {"name": "vm1"}, "id": ID}`
	default:
		return `{"error": {"class": "CommandNotFound", "desc": "The command nope has not been found"}, "id": ID}`
	}
}

func TestHandshakeCommandsErrorsEvents(t *testing.T) {
	f, conn := startFake(t, vm1)
	ctx, c := newClient(t, conn, 5*time.Second)
	if c.Greeting.QMP.Version.QEMU.Major != 7 {
		t.Errorf("greeting %+v", c.Greeting)
	}
	if r := <-f.reqs; r["execute"] != "qmp_capabilities" {
		t.Errorf("first request %v, want the capabilities handshake", r)
	}
	var name struct{ Name string }
	if err := c.Run(ctx, "query-name", nil, &name); err != nil || name.Name != "vm1" {
		t.Errorf("query-name: %+v, %v", name, err)
	}
	_, err := c.Execute(ctx, "nope", map[string]int{"x": 1})
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" || !strings.Contains(err.Error(), "nope") {
		t.Errorf("error reply: %v", err)
	}
	if ev := c.Events(); len(ev) != 3 || ev[0].Event != "NIC_RX_FILTER_CHANGED" {
		t.Errorf("events %+v", ev)
	}
	if ev := c.Events(); len(ev) != 0 {
		t.Errorf("events not cleared: %v", ev)
	}
}

func TestSendFD(t *testing.T) {
	f, conn := startFake(t, func(req map[string]any) string { return `{"return": {}, "id": ID}` })
	ctx := context.Background()
	c, err := New(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-f.reqs
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	defer unix.Close(efd)
	if err := c.SendFD(ctx, "tap0", efd); err != nil {
		t.Fatal(err)
	}
	req := <-f.reqs
	if req["execute"] != "getfd" || req["arguments"].(map[string]any)["fdname"] != "tap0" {
		t.Errorf("getfd request %v", req)
	}
	select {
	case got := <-f.gotFDs:
		var a, b unix.Stat_t
		unix.Fstat(efd, &a)
		unix.Fstat(got, &b)
		if a.Ino != b.Ino {
			t.Errorf("received fd is another file")
		}
		unix.Close(got)
	case <-time.After(2 * time.Second):
		t.Fatal("no fd came with getfd")
	}
}

func TestTimeoutAndBadPeer(t *testing.T) {
	server, client := pair(t)
	defer server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := New(ctx, client); err == nil {
		t.Error("a silent peer passed the handshake")
	}
	server2, client2 := pair(t)
	go func() { server2.Write([]byte("hello, I am not QEMU\n")); time.Sleep(time.Second); server2.Close() }()
	if _, err := New(context.Background(), client2); err == nil || !strings.Contains(err.Error(), "not a QMP greeting") {
		t.Errorf("bad greeting: %v", err)
	}
	if _, err := Dial(context.Background(), "/nonexistent/qmp.sock"); err == nil || !strings.Contains(err.Error(), "-qmp unix:") {
		t.Errorf("dial a missing socket: %v", err)
	}
}
