package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/policy/host"
)

// The probe's errors on this host (Debian 12's QEMU 7.2 machine, 6.x
// kernel without vdpa and vhost-net), as netctl probe --json printed them.
const (
	probeVDPAError  = "vdpa: not available: this kernel has no vdpa support loaded: modprobe vdpa (CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): netlink receive: no such file or directory"
	probeVhostError = "vhost-net: /dev/vhost-net: not available: no such file or directory: this kernel has no vhost-net loaded; run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net"
)

// TestStepReasonsSayItOnce: a skipped step's reason does not repeat its
// backend's name or the sentinel's "not available" (the step is shown as
// "vdpa: REASON"), and still says what to do.
func TestStepReasonsSayItOnce(t *testing.T) {
	h := load(t, "probe-host-root.json")
	h.VDPA.Error, h.VhostNet.Error = probeVDPAError, probeVhostError
	d, err := Decide(h, Request{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{BackendVDPA, false, "this kernel has no vdpa support loaded: modprobe vdpa (CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): netlink receive: no such file or directory"},
		{BackendVhostNet, false, "/dev/vhost-net: no such file or directory: this kernel has no vhost-net loaded; run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net"},
		{BackendUserspace, true, "QEMU moves the packets itself (vhost=off) through a tap (slowest, always available)"},
	}
	if len(d.Steps) != len(want) {
		t.Fatalf("steps %+v", d.Steps)
	}
	for i := range want {
		if d.Steps[i] != want[i] {
			t.Errorf("step %d:\n got %+v\nwant %+v", i, d.Steps[i], want[i])
		}
	}

	// The older probe wording ("vdpa: no vdpa netlink family: ...",
	// "vhost-net not available") reads once too.
	d, _ = Decide(load(t, "probe-host-root.json"), Request{})
	if got, want := d.Steps[0].Reason, "no vdpa netlink family: this kernel has no vdpa support loaded: modprobe vdpa (CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): netlink receive: no such file or directory"; got != want {
		t.Errorf("vdpa step %q, want %q", got, want)
	}
	if got, want := d.Steps[1].Reason, "/dev/vhost-net: no such file or directory: this kernel has no vhost-net loaded; run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net"; got != want {
		t.Errorf("vhost-net step %q, want %q", got, want)
	}

	// vdpa there but nothing bound: how to get a device.
	d, _ = Decide(load(t, "probe-6.12.json"), Request{})
	if got, want := d.Steps[0].Reason, "no vdpa device bound to vhost_vdpa: netctl vdpa mgmtdev show lists the management devices; --mgmtdev MGMTDEV creates one (or netctl vdpa dev add, then bind it to vhost_vdpa)"; got != want {
		t.Errorf("6.12 vdpa step %q, want %q", got, want)
	}

	// No error text from the probe at all: still what to do.
	bare := *h
	bare.VDPA, bare.VhostNet = host.VDPA{}, host.VhostNet{}
	d, _ = Decide(&bare, Request{})
	if d.Steps[0].Reason != "the kernel has no vdpa netlink family: modprobe vdpa (CONFIG_VDPA, Linux 5.12+)" ||
		d.Steps[1].Reason != "no /dev/vhost-net: modprobe vhost_net (CONFIG_VHOST_NET)" {
		t.Errorf("steps without probe errors %+v", d.Steps)
	}
	for _, s := range d.Steps {
		if strings.HasPrefix(s.Reason, s.Backend+":") {
			t.Errorf("step %s repeats its name: %q", s.Backend, s.Reason)
		}
	}
}

// TestForcedBackendSaysItsOwnReason: --backend vdpa or vhost-net that is
// not here fails with that backend's reason, not the last step's ("not
// requested").
func TestForcedBackendSaysItsOwnReason(t *testing.T) {
	h := load(t, "probe-host-root.json")
	h.VDPA.Error, h.VhostNet.Error = probeVDPAError, probeVhostError
	for backend, want := range map[string]string{
		BackendVDPA: "policy: backend vdpa is not available here: this kernel has no vdpa support loaded: modprobe vdpa (CONFIG_VDPA, Linux 5.12+; Debian 12's 6.1 kernel has none): netlink receive: no such file or directory",
		BackendVhostNet: "policy: backend vhost-net is not available here: /dev/vhost-net: no such file or directory: this kernel has no vhost-net loaded; " +
			"run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net",
	} {
		d, err := Decide(h, Request{Backend: backend})
		if !errors.Is(err, ErrNotAvailable) || err.Error() != want {
			t.Errorf("--backend %s:\n got %v\nwant %s", backend, err, want)
		}
		if d.Backend != "" {
			t.Errorf("--backend %s chose %s", backend, d.Backend)
		}
	}
}

func TestStepReason(t *testing.T) {
	for _, c := range []struct{ backend, in, want string }{
		{"vdpa", "vdpa: vdpa: not available: x", "x"},
		{"vdpa", "vdpa device d0: y", "vdpa device d0: y"},
		{"vhost-net", "vhost-net: /dev/vhost-net: vhost-net not available: z", "/dev/vhost-net: z"},
		{"vhost-net", "", ""},
	} {
		if got := stepReason(c.backend, c.in); got != c.want {
			t.Errorf("stepReason(%q, %q) = %q, want %q", c.backend, c.in, got, c.want)
		}
	}
}
