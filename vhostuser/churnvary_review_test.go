package vhostuser

import (
	"strings"
	"sync"
	"testing"
)

// TestBridgeChattyFrontendVaryingRefusals: a front-end that repeats a
// refused request with a different value each time (SET_VRING_NUM 3, 5,
// 7, ..., REPLY_ACK so the connection stays) changes nothing but the last
// error's text, and must not have the status rewritten once per message
// (TestBridgeChattyFrontend repeats one value, whose error text does not
// change). At most warnBurst publications per window, as for the log.
func TestBridgeChattyFrontendVaryingRefusals(t *testing.T) {
	var (
		mu       sync.Mutex
		statuses []Status
	)
	r := startBridge(t, 1, func(c *Config) {
		c.OnStatus = func(st Status) {
			mu.Lock()
			defer mu.Unlock()
			statuses = append(statuses, st)
		}
	})
	f := dialFrontend(t, r.path)
	f.setup()
	mu.Lock()
	before := len(statuses)
	mu.Unlock()
	const n = 300
	for i := 0; i < n; i++ {
		f.refused(SetVringNum, VringState{Index: 0, Num: uint32(3 + 2*i)})
	}
	mu.Lock()
	got := len(statuses) - before
	mu.Unlock()
	if got > warnBurst {
		t.Errorf("%d refused requests with varying values published the status %d times, want at most %d", n, got, warnBurst)
	}
	if got == 0 {
		t.Error("no refusal was published")
	}
	// A real change is published at once, with the latest error.
	f.c.Close()
	r.waitIdle(t, 1)
	mu.Lock()
	last := statuses[len(statuses)-1]
	mu.Unlock()
	if last.Connected || !strings.Contains(last.LastError, "size") {
		t.Errorf("after the front-end left the published status is %+v; want disconnected with the last refusal's error", last)
	}
}
