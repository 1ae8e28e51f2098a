package gather

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/diagnose"
)

// TestReadVDPAHonoursTheDeadline: the vdpa family can stall every request
// while a vdpa dev del waits for a vhost-vdpa fd to close, so the vdpa
// part of Gather must give up when the caller's context (diagnose
// --timeout) ends instead of asking the kernel without a deadline. With a
// context that has already ended, readVDPA must not reach the kernel and
// must say why. This process holds no vhost-vdpa fd, so readVDPA takes the
// path that dials the family to explain why.
func TestReadVDPAHonoursTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &diagnose.Snapshot{}
	readVDPA(ctx, s, os.Getpid())
	if len(s.Errors) == 0 || !strings.Contains(strings.Join(s.Errors, "\n"), context.Canceled.Error()) {
		t.Errorf("readVDPA with an ended context noted %q, want the context's error", s.Errors)
	}
}
