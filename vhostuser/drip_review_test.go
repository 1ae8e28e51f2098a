package vhostuser

import (
	"testing"
	"time"
)

// TestBridgeHandshakeDeadlineNotReset: a front-end that never finishes
// its handshake but sends SET_OWNER (accepted, no reply) every third of
// the deadline holds the bridge, which serves one front-end at a time,
// as surely as a silent one. The deadline must count from the
// connection, not from its last message: such a front-end is dropped
// once HandshakeTimeout has passed since it connected.
func TestBridgeHandshakeDeadlineNotReset(t *testing.T) {
	const timeout = 300 * time.Millisecond
	r := startBridge(t, 1, func(c *Config) { c.HandshakeTimeout = timeout })
	f := dialFrontend(t, r.path)
	start := time.Now()
	for time.Since(start) < 6*timeout {
		if err := f.send(SetOwner, nil, 0); err != nil {
			t.Logf("dropped: a send failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
			return
		}
		time.Sleep(timeout / 3)
	}
	t.Errorf("a front-end that never finished its handshake, sending SET_OWNER every %v, was still served after %v (deadline %v); status %+v",
		timeout/3, time.Since(start).Round(time.Millisecond), timeout, r.b.Status())
}
