package qmp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBatch(t *testing.T) {
	f, conn := startFake(t, vm1)
	ctx, c := newClient(t, conn, 5*time.Second)
	<-f.reqs
	var n1, n2 struct{ Name string }
	errs := c.Batch(ctx, []Cmd{{Name: "query-name", Out: &n1}, {Name: "nope", Args: map[string]int{"x": 1}}, {Name: "query-name", Out: &n2}})
	var qe *Error
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &qe) || qe.Command != "nope" || qe.Class != "CommandNotFound" {
		t.Fatalf("errs %v", errs)
	}
	if n1.Name != "vm1" || n2.Name != "vm1" {
		t.Errorf("outs %+v %+v", n1, n2)
	}
	// In the order given, with ids in sequence after the handshake's.
	for i, want := range []string{"query-name", "nope", "query-name"} {
		r := <-f.reqs
		if r["execute"] != want || r["id"] != float64(i+2) {
			t.Errorf("request %d: %v, want %s with id %d", i, r, want, i+2)
		}
	}
	if ev := c.Events(); len(ev) != 4 {
		t.Errorf("events %d, want 4 (one before each reply)", len(ev))
	}
	// The client is still in step: a command after the batch works.
	if err := c.Run(ctx, "query-name", nil, &n1); err != nil {
		t.Errorf("after the batch: %v", err)
	}
	if errs := c.Batch(ctx, nil); len(errs) != 0 {
		t.Errorf("empty batch: %v", errs)
	}
}

func TestBatchConnectionLost(t *testing.T) {
	_, conn := serve(t, greeting72+"\n", func(req map[string]any) []string {
		switch req["execute"] {
		case "qmp_capabilities", "query-name":
			return []string{`{"return": {}, "id": ID}` + "\n"}
		}
		return []string{closeConn}
	})
	ctx, c := newClient(t, conn, 5*time.Second)
	errs := c.Batch(ctx, []Cmd{{Name: "query-name"}, {Name: "quit"}, {Name: "query-name"}})
	// The last was sent with the others: whether QEMU ran it is unknown.
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "quit") ||
		errs[2] == nil || !strings.Contains(errs[2].Error(), "may have run") {
		t.Fatalf("errs %v", errs)
	}
}

func TestBatchUnencodable(t *testing.T) {
	f, conn := startFake(t, func(req map[string]any) string { return `{"return": {}, "id": ID}` })
	ctx, c := newClient(t, conn, 5*time.Second)
	<-f.reqs
	errs := c.Batch(ctx, []Cmd{{Name: "a"}, {Name: "b", Args: map[string]any{"x": make(chan int)}}, {Name: "c"}})
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "encode") || errs[2] == nil || !strings.Contains(errs[2].Error(), "not sent") {
		t.Fatalf("errs %v", errs)
	}
	if r := <-f.reqs; r["execute"] != "a" {
		t.Errorf("sent %v", r)
	}
	// Nothing else was sent, and the client is in step.
	if err := c.Run(ctx, "d", nil, nil); err != nil {
		t.Fatal(err)
	}
	if r := <-f.reqs; r["execute"] != "d" {
		t.Errorf("after the batch QEMU got %v, want d alone", r)
	}
}

// TestHandshakeWritesNothingToANonQMPPeer: a socket that is not QEMU's
// QMP monitor (a serial console that prints a login prompt) gets nothing
// written to it: the greeting is read first.
func TestHandshakeWritesNothingToANonQMPPeer(t *testing.T) {
	server, client := pair(t)
	got := make(chan []byte, 1)
	go func() {
		defer server.Close()
		server.Write([]byte("Debian GNU/Linux 12 vm1 ttyS0\n\nvm1 login: "))
		server.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 512)
		n, _ := server.Read(buf)
		got <- buf[:n]
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := New(ctx, client); err == nil {
		c.Close()
		t.Fatal("a login prompt taken for a greeting")
	}
	client.Close()
	if b := <-got; len(b) != 0 {
		t.Fatalf("wrote %q to a socket that is not QMP", b)
	}
}
