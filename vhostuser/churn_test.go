package vhostuser

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log destination safe for the bridge's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBridgeChattyFrontend: a front-end that repeats a refused request
// (with REPLY_ACK, so the connection stays) changes nothing, so the
// status is published once (its last error), not once per message, and
// the warnings are rate-limited, the number held back said in the log;
// so are the warnings for connections refused while one is served.
func TestBridgeChattyFrontend(t *testing.T) {
	var (
		mu       sync.Mutex
		statuses []Status
	)
	logs := &syncBuffer{}
	r := startBridge(t, 1, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.OnStatus = func(st Status) {
			mu.Lock()
			defer mu.Unlock()
			statuses = append(statuses, st)
		}
	})
	published := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(statuses)
	}
	f := dialFrontend(t, r.path)
	f.setup()
	before := published()
	const n = 500
	for i := 0; i < n; i++ {
		f.refused(SetVringNum, VringState{Index: 0, Num: 3}) // and a GET_FEATURES after each
	}
	if got := published() - before; got != 1 {
		t.Errorf("%d refused requests (and as many GET_FEATURES) published the status %d times, want once (the new last error)", n, got)
	}
	mu.Lock()
	last := statuses[len(statuses)-1]
	mu.Unlock()
	if !strings.Contains(last.LastError, "size 3") {
		t.Errorf("the published status's last error is %q, want the refusal's", last.LastError)
	}
	lines := strings.Count(logs.String(), "request refused")
	if lines > warnBurst {
		t.Errorf("%d refused requests logged %d warnings, want at most %d", n, lines, warnBurst)
	}
	if lines == 0 {
		t.Error("no refusal was logged")
	}

	// Connections refused while f is served.
	for i := 0; i < 50; i++ {
		c, err := net.Dial("unix", r.path)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		c.Read(b[:]) // closed by the bridge
		c.Close()
	}
	if st := r.b.Status(); st.Refused != 50 {
		t.Errorf("refused %d connections, want 50", st.Refused)
	}
	if lines := strings.Count(logs.String(), "connection refused"); lines > warnBurst {
		t.Errorf("50 refused connections logged %d warnings, want at most %d", lines, warnBurst)
	}
	f.c.Close()
	r.waitIdle(t, 1)
	if out := logs.String(); !strings.Contains(out, "not logged") {
		t.Errorf("the log does not say that warnings were held back:\n%s", out)
	}
}

// TestLogLimit: warnBurst lines per window, then none until the window
// has passed; the first line after that carries the number held back.
func TestLogLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &logLimit{now: func() time.Time { return now }}
	for i := 0; i < warnBurst; i++ {
		if ok, held := l.allow(); !ok || held != 0 {
			t.Fatalf("line %d: allow %v %d, want true 0", i, ok, held)
		}
	}
	for i := 0; i < 3; i++ {
		if ok, _ := l.allow(); ok {
			t.Fatalf("line %d of the window let through, want at most %d", warnBurst+i, warnBurst)
		}
	}
	now = now.Add(warnWindow - time.Millisecond)
	if ok, _ := l.allow(); ok {
		t.Fatal("a line let through before the window ended")
	}
	now = now.Add(time.Millisecond)
	if ok, held := l.allow(); !ok || held != 4 {
		t.Fatalf("first line of the next window: allow %v %d, want true 4", ok, held)
	}
	if held := l.flush(); held != 0 {
		t.Fatalf("flush after the report: %d, want 0", held)
	}
}
