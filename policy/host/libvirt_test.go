package host

import (
	"strings"
	"testing"
)

func TestForLibvirtDomain(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		taken bool
	}{{"kvm", false}, {"qemu", true}, {"", true}, {"KVM", true}} {
		d := Description{VhostNet: VhostNet{Available: true}}
		if got := d.ForLibvirtDomain(tc.typ); got != tc.taken || d.VhostNet.Available == tc.taken {
			t.Errorf("type %q: taken %v, available %v (want taken %v)", tc.typ, got, d.VhostNet.Available, tc.taken)
		}
		if tc.taken && !strings.Contains(d.VhostNet.Error, "type 'kvm'") {
			t.Errorf("type %q: reason %q names no domain type", tc.typ, d.VhostNet.Error)
		}
	}
	d := Description{VhostNet: VhostNet{Error: "no /dev/vhost-net"}}
	if d.ForLibvirtDomain("qemu") || d.VhostNet.Error != "no /dev/vhost-net" {
		t.Errorf("a host without vhost-net keeps its own reason: %+v", d.VhostNet)
	}
}
