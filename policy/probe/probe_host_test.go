package probe

import (
	"net"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostProbe runs the probe on this machine's kernel (no vhost-net,
// no vDPA, tun with USO): it says what is missing and why, and leaves no
// link behind in the caller's namespace.
func TestHostProbe(t *testing.T) {
	testenv.Host(t)
	before, _ := net.Interfaces()
	r, err := Probe(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Tap.Available || len(r.Tap.Offloads) == 0 || !r.Macvtap.Available {
		t.Errorf("tap %+v, macvtap %+v", r.Tap, r.Macvtap)
	}
	if !r.VhostNet.Available && !strings.Contains(r.VhostNet.Error, "modprobe vhost_net") {
		t.Errorf("vhost-net unavailable without saying what to do: %q", r.VhostNet.Error)
	}
	if !r.VDPA.Available && r.VDPA.Error == "" {
		t.Error("vdpa unavailable without a reason")
	}
	after, _ := net.Interfaces()
	if len(after) != len(before) {
		t.Errorf("%d links before the probe, %d after", len(before), len(after))
	}
}
