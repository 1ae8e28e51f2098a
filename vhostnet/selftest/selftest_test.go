package selftest

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/vhostnet"
)

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{{Queues: 17}, {Queues: -1}, {FrameSize: 40}, {FrameSize: 4000}} {
		if _, err := Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "use ") {
			t.Errorf("%+v: %v, want an error saying what to use", o, err)
		}
	}
}

// TestNoVhostNetSaysWhy runs where /dev/vhost-net is missing (the
// development machines): the error says so and what to do.
func TestNoVhostNetSaysWhy(t *testing.T) {
	if _, err := os.Stat(vhostnet.DevicePath); err == nil {
		t.Skip("this host has /dev/vhost-net")
	}
	_, err := Run(t.Context(), Options{})
	if !errors.Is(err, vhostnet.ErrNotAvailable) || !strings.Contains(err.Error(), "modprobe vhost_net") {
		t.Errorf("got %v, want ErrNotAvailable with what to do", err)
	}
}
