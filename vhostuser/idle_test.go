package vhostuser

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBridgeHandshakeDeadline: a front-end that connects and sends
// nothing, or stops halfway through the handshake, is dropped after
// HandshakeTimeout, with the reason in the log, so the next front-end can
// connect; one that finished the handshake may then stay silent (a guest
// that has not started its NIC yet) and is kept.
func TestBridgeHandshakeDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	logs := &syncBuffer{}
	r := startBridge(t, 1, func(c *Config) {
		c.HandshakeTimeout = timeout
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})

	// Silent from the start.
	silent := dialFrontend(t, r.path)
	start := time.Now()
	silent.expectClosed()
	if d := time.Since(start); d < timeout {
		t.Errorf("the silent front-end was dropped after %v, before the %v deadline", d, timeout)
	}
	r.waitIdle(t, 1)
	if out := logs.String(); !strings.Contains(out, "dropped") || !strings.Contains(out, "sent nothing for 300ms") {
		t.Errorf("the log does not say why the front-end was dropped:\n%s", out)
	}

	// Halfway: features read, protocol features asked for, never set.
	half := dialFrontend(t, r.path)
	half.get(GetFeatures, nil)
	half.get(GetProtocolFeatures, nil)
	half.expectClosed()
	r.waitIdle(t, 2)

	// Done: QEMU's handshake, then silence well past the deadline.
	f := dialFrontend(t, r.path)
	f.must(SetOwner, nil)
	f.get(GetFeatures, nil)
	f.get(GetProtocolFeatures, nil)
	f.must(SetProtocolFeatures, U64(ProtocolReplyAck|ProtocolMQ))
	f.proto = ProtocolReplyAck | ProtocolMQ
	time.Sleep(3 * timeout)
	if st := r.b.Status(); !st.Connected || st.Sessions != 3 {
		t.Fatalf("status %+v: a front-end past its handshake was dropped for being idle", st)
	}
	f.get(GetFeatures, nil) // still served
	// The next front-end is refused while it is connected, as before.
	c, err := net.Dial("unix", r.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for end := time.Now().Add(time.Minute); r.b.Status().Refused == 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
	}
	if st := r.b.Status(); st.Refused != 1 || st.FrontendPID == 0 {
		t.Errorf("status %+v: want the second connection refused, the first served", st)
	}
}
