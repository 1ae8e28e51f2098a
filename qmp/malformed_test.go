package qmp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// okHandshake answers qmp_capabilities and hands every other command to
// answer.
func okHandshake(answer func(req map[string]any) []string) func(req map[string]any) []string {
	return func(req map[string]any) []string {
		if req["execute"] == "qmp_capabilities" {
			return []string{`{"return": {}, "id": ID}` + "\n"}
		}
		return answer(req)
	}
}

// TestMalformedReplies: a fake QEMU answers query-name with truncated,
// oversized, wrong-typed and out-of-order replies; the client returns an
// error (never panics, never waits for the context), and after a protocol
// error it refuses further commands instead of reading someone else's
// reply.
func TestMalformedReplies(t *testing.T) {
	huge := strings.Repeat("x", MaxLine)
	for _, tc := range []struct {
		name     string
		answer   []string
		want     string // in the error
		protocol bool   // wraps ErrProtocol (and the client is then out of step)
	}{
		{"truncated then closed", []string{`{"return": {"na`, closeConn}, "QEMU closed the connection", false},
		{"closed without a reply", []string{closeConn}, "QEMU closed the connection", false},
		{"truncated line", []string{`{"return": {"na` + "\n"}, "unexpected EOF", true},
		{"oversized line", []string{`{"return": {"name": "` + huge + `"}, "id": ID}` + "\n"}, fmt.Sprintf("longer than %d bytes", MaxLine), true},
		{"oversized line without newline", []string{huge + huge[:8192]}, fmt.Sprintf("longer than %d bytes", MaxLine), true},
		{"array", []string{`[1, 2]` + "\n"}, "not a JSON object", true},
		{"string", []string{`"hello"` + "\n"}, "not a JSON object", true},
		{"number", []string{`42` + "\n"}, "not a JSON object", true},
		{"null", []string{`null` + "\n"}, "not a JSON object", true},
		{"empty line", []string{"\n"}, "not a JSON object", true},
		{"two objects on a line", []string{`{"return": {}, "id": ID} {"return": {}}` + "\n"}, "more than one JSON value", true},
		{"neither return nor error", []string{`{"id": ID}` + "\n"}, "neither a reply nor an event", true},
		{"return and error", []string{`{"return": {}, "error": {"class": "X", "desc": "y"}, "id": ID}` + "\n"}, "both return and error", true},
		{"error of the wrong type", []string{`{"error": "boom", "id": ID}` + "\n"}, "cannot unmarshal string", true},
		{"id of the wrong type", []string{`{"return": {}, "id": "one"}` + "\n"}, `"id" is not an integer`, true},
		{"reply to a request never sent", []string{`{"return": {}, "id": 99}` + "\n"}, "request 99, which was never sent", true},
		{"reply to request 0", []string{`{"return": {}, "id": 0}` + "\n"}, "request 0, which was never sent", true},
		{"event name of the wrong type", []string{`{"event": 5}` + "\n"}, "cannot unmarshal number", true},
		{"event data not an object", []string{`{"event": "STOP", "data": [1]}` + "\n"}, `"data" is not an object`, true},
		{"deep nesting", []string{`{"return": ` + strings.Repeat("[", 100000) + "\n"}, "exceeded max depth", true},
		{"return of the wrong type", []string{`{"return": [1, 2], "id": ID}` + "\n"}, "decode reply", false},
		{"return null", []string{`{"return": null, "id": ID}` + "\n"}, "neither a reply nor an event", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, conn := serve(t, greeting72+"\n", okHandshake(func(req map[string]any) []string {
				if req["execute"] == "query-name" {
					return tc.answer
				}
				return []string{`{"return": {}, "id": ID}` + "\n"}
			}))
			ctx, c := newClient(t, conn, 10*time.Second)
			var name struct{ Name string }
			err := c.Run(ctx, "query-name", nil, &name)
			switch {
			case err == nil:
				t.Fatalf("no error, got %+v", name)
			case ctx.Err() != nil:
				t.Fatalf("waited for the context: %v", err)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to say %q", err, tc.want)
			case errors.Is(err, ErrProtocol) != tc.protocol:
				t.Errorf("errors.Is(%v, ErrProtocol) = %v, want %v", err, !tc.protocol, tc.protocol)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error message of %d bytes: quote less of the line", len(err.Error()))
			}
			_, err = c.Execute(ctx, "query-status", nil)
			switch {
			case tc.protocol && (err == nil || !strings.Contains(err.Error(), "out of step")):
				t.Errorf("after a protocol error the next command got %v, want an out-of-step error", err)
			case tc.name == "return of the wrong type" && err != nil:
				t.Errorf("a reply that did not fit the caller's type broke the connection: %v", err)
			}
		})
	}
}

// TestMalformedGreeting: the handshake fails with an error, and does not
// hang, on whatever comes instead of QEMU's greeting.
func TestMalformedGreeting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		greeting string
		want     string
	}{
		{"reply before the greeting", `{"return": {}, "id": 1}` + "\n", "not a QMP greeting"},
		{"event before the greeting", `{"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 2}}` + "\n", "not a QMP greeting"},
		{"version of the wrong type", `{"QMP": {"version": "7.2", "capabilities": ["oob"]}}` + "\n", "not a QMP greeting"},
		{"capabilities of the wrong type", `{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": "oob"}}` + "\n", "not a QMP greeting"},
		{"no capabilities", `{"QMP": {"version": {"qemu": {"major": 7}}}}` + "\n", "not a QMP greeting"},
		{"not an object", `["QMP"]` + "\n", "not a QMP greeting"},
		{"not JSON", "hello, I am not QEMU\n", "not a QMP greeting"},
		{"truncated", `{"QMP": {"vers` + closeConn, "QEMU closed the connection"},
		{"oversized", `{"QMP": "` + strings.Repeat("x", MaxLine+8192), fmt.Sprintf("longer than %d bytes", MaxLine)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, after, _ := strings.Cut(tc.greeting, closeConn)
			lines := []string{g}
			if after != "" || strings.HasSuffix(tc.greeting, closeConn) {
				lines = append(lines, closeConn)
			}
			server, client := pair(t)
			go func() {
				defer server.Close()
				if writeLines(server, lines, "", "") {
					time.Sleep(5 * time.Second) // silent after the greeting
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := New(ctx, client)
			switch {
			case err == nil:
				t.Fatal("no error")
			case ctx.Err() != nil:
				t.Fatalf("waited for the context: %v", err)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			client.Close()
		})
	}
	// The handshake itself answered with an error.
	_, conn := serve(t, greeting72+"\n", func(req map[string]any) []string {
		return []string{`{"id": ID, "error": {"class": "CommandNotFound", "desc": "The command qmp_capabilities has not been found"}}` + "\n"}
	})
	var qe *Error
	if _, err := New(context.Background(), conn); !errors.As(err, &qe) || qe.Command != "qmp_capabilities" {
		t.Errorf("handshake refused: %v", err)
	}
}

// TestOutOfOrderReplies: a stale reply (to a command whose caller gave up),
// events in between and a reply split over several writes are all handled.
func TestOutOfOrderReplies(t *testing.T) {
	_, conn := serve(t, greeting72+"\n", okHandshake(func(req map[string]any) []string {
		return []string{
			`{"return": {"name": "stale"}, "id": PREV}` + "\n",
			`{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "STOP"}` + "\n",
			`{"return": {"na`, `me": "vm1"}, `, `"id": ID}` + "\n",
		}
	}))
	ctx, c := newClient(t, conn, 5*time.Second)
	for range 3 {
		var name struct{ Name string }
		if err := c.Run(ctx, "query-name", nil, &name); err != nil || name.Name != "vm1" {
			t.Fatalf("query-name: %+v, %v", name, err)
		}
	}
	if ev := c.Events(); len(ev) != 3 || ev[0].Event != "STOP" {
		t.Errorf("events %+v", ev)
	}
}

// TestTimeoutMidLine: a command times out while QEMU is half-way through
// its reply; the next command finishes that line, skips it as stale and
// gets its own reply.
func TestTimeoutMidLine(t *testing.T) {
	_, conn := serve(t, greeting72+"\n", okHandshake(func(req map[string]any) []string {
		if req["execute"] == "slow" {
			return []string{`{"return": {"name": "sl`, pause, `ow"}, "id": ID}` + "\n"}
		}
		return []string{`{"return": {"name": "vm1"}, "id": ID}` + "\n"}
	}))
	c, err := New(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Execute(ctx, "slow", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow command: %v, want the deadline", err)
	}
	var name struct{ Name string }
	if err := c.Run(context.Background(), "query-name", nil, &name); err != nil || name.Name != "vm1" {
		t.Fatalf("query-name after a timeout mid-line: %+v, %v", name, err)
	}
}

// TestCancelAroundReply cancels commands just before, while and just after
// QEMU's reply comes back; whatever the cancelled command returned, the
// next command (with no deadline of its own) must work: a late
// cancellation must not leave a past deadline on the connection.
func TestCancelAroundReply(t *testing.T) {
	replied := make(chan struct{}, 1)
	_, conn := serve(t, greeting72+"\n", okHandshake(func(req map[string]any) []string {
		if req["execute"] == "query-status" {
			select {
			case replied <- struct{}{}:
			default:
			}
		}
		return []string{`{"return": {"status": "running", "singlestep": false, "running": true}, "id": ID}` + "\n"}
	}))
	c, err := New(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		if i%2 == 0 {
			go func() { // cancel at a random moment around the reply
				defer close(done)
				<-replied
				for range rand.IntN(64) {
					runtime.Gosched()
				}
				cancel()
			}()
		}
		c.Execute(ctx, "query-status", nil) // may fail: it was cancelled
		cancel()                            // cancel right after the command returned
		if i%2 == 0 {
			<-done
		} else {
			select { // the odd rounds did not wait for the signal
			case <-replied:
			default:
			}
		}
		if _, err := c.Execute(context.Background(), "query-name", nil); err != nil {
			t.Fatalf("round %d: the command after a cancelled one failed: %v", i, err)
		}
	}
}

// TestEventQueueBounded: events that nobody collects are kept up to
// MaxEvents and MaxEventBytes; older ones are dropped and counted.
func TestEventQueueBounded(t *testing.T) {
	const extra = 10
	big := `"` + strings.Repeat("e", 100<<10) + `"`
	_, conn := serve(t, greeting72+"\n", okHandshake(func(req map[string]any) []string {
		var out []string
		switch req["execute"] {
		case "many":
			for i := range MaxEvents + extra {
				out = append(out, fmt.Sprintf(`{"event": "E", "data": {"seq": %d}, "timestamp": {"seconds": 1, "microseconds": 2}}`+"\n", i))
			}
		case "big":
			for i := range 20 {
				out = append(out, fmt.Sprintf(`{"event": "B", "data": {"seq": %d, "pad": %s}}`+"\n", i, big))
			}
		}
		return append(out, `{"return": {}, "id": ID}`+"\n")
	}))
	ctx, c := newClient(t, conn, 10*time.Second)
	if _, err := c.Execute(ctx, "many", nil); err != nil {
		t.Fatal(err)
	}
	ev := c.Events()
	if len(ev) != MaxEvents || c.DroppedEvents() != extra {
		t.Fatalf("kept %d events, dropped %d; want %d and %d", len(ev), c.DroppedEvents(), MaxEvents, extra)
	}
	if want := fmt.Sprintf(`{"seq": %d}`, extra); string(ev[0].Data) != want {
		t.Errorf("oldest kept event %s, want %s (the oldest are dropped)", ev[0].Data, want)
	}
	if _, err := c.Execute(ctx, "big", nil); err != nil {
		t.Fatal(err)
	}
	ev = c.Events()
	size := 0
	for _, e := range ev {
		size += len(e.Event) + len(e.Data)
	}
	if size > MaxEventBytes || len(ev) == 0 || len(ev)+int(c.DroppedEvents()) != 20+extra {
		t.Errorf("kept %d events of %d bytes, dropped %d in all", len(ev), size, c.DroppedEvents())
	}
	if !strings.Contains(string(ev[len(ev)-1].Data), `"seq": 19`) {
		t.Errorf("the newest event was not kept")
	}
}
