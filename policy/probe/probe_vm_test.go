package probe

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/host"
	"github.com/netctl/netctl/test/vduse"
	"github.com/netctl/netctl/vdpa"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/virtio"
)

// TestVMProbeMatchesKernel: the probe finds what each VM kernel is known to
// have: USO and the vdpa family on 6.12 only; busy-poll measured on both.
func TestVMProbeMatchesKernel(t *testing.T) {
	k := testenv.VM(t)
	r, err := Probe([]string{"lo", "nosuch0"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"6.12": "0x1033d008000", "6.1": "0x33d008000"}[k.Name]
	if want == "" {
		t.Fatalf("no expectation for kernel %s", k.Name)
	}
	if !r.VhostNet.Available || r.VhostNet.FeaturesHex != want || r.VhostNet.MaxMemRegions != 64 || r.VhostNet.Error != "" {
		t.Errorf("vhost-net %+v, want available with features %s", r.VhostNet, want)
	}
	if r.VhostNet.BusyPoll == nil || !*r.VhostNet.BusyPoll {
		t.Errorf("busy-poll not measured as working on %s: %v (%s)", k.Name, r.VhostNet.BusyPoll, r.VhostNet.BusyPollError)
	}
	if r.VhostNet.ForkFromOwner != (k.Name == "6.12") {
		t.Errorf("fork-from-owner control %v on %s", r.VhostNet.ForkFromOwner, k.Name)
	}
	uso := slices.Contains(r.Tap.Offloads, "uso4") && slices.Contains(r.Tap.Offloads, "uso6")
	if !r.Tap.Available || uso != k.Has("tun_uso") || !slices.Contains(r.Tap.Offloads, "tso4") || r.Tap.Error != "" {
		t.Errorf("tap %+v on %s (USO expected: %v)", r.Tap, k.Name, k.Has("tun_uso"))
	}
	if !r.Macvtap.Available || r.Macvtap.Error != "" {
		t.Errorf("macvtap %+v", r.Macvtap)
	}
	if r.VDPA.Available != k.Has("vdpa") {
		t.Errorf("vdpa %+v on %s", r.VDPA, k.Name)
	}
	if k.Has("vdpa") && !slices.Contains(r.VDPA.MgmtDevs, "vduse") {
		t.Errorf("vdpa management devices %v, want vduse", r.VDPA.MgmtDevs)
	}
	if !k.Has("vdpa") && !strings.Contains(r.VDPA.Error, "no vdpa support") {
		t.Errorf("vdpa error %q", r.VDPA.Error)
	}
	if !r.ZeroCopy.Loaded || r.ZeroCopy.Enabled || r.ZeroCopy.Error != "" {
		t.Errorf("zero-copy %+v", r.ZeroCopy)
	}
	if len(r.Devices) != 2 || r.Devices[0].Name != "lo" || !r.Devices[0].Features["loopback"] ||
		r.Devices[1].Name != "nosuch0" || r.Devices[1].Error == "" {
		t.Errorf("devices %+v", r.Devices)
	}
	if r.QEMU.Version != "" || !strings.Contains(r.QEMU.Error, "no qemu-system-x86_64 in PATH") {
		t.Errorf("qemu %+v: the VM has none", r.QEMU)
	}
	// The JSON keys scripts rely on.
	b, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, path := range [][]string{{"schema"}, {"hostname"}, {"kernel"}, {"vhost_net", "available"}, {"vhost_net", "features"},
		{"vhost_net", "busy_poll"}, {"tap", "offloads"}, {"vdpa", "available"}, {"vdpa", "mgmtdevs"}, {"zerocopy", "enabled"}, {"qemu"}} {
		var cur any = m
		for _, p := range path {
			cur, _ = cur.(map[string]any)[p]
		}
		if cur == nil {
			t.Errorf("JSON lacks %s", strings.Join(path, "."))
		}
	}
	t.Logf("kernel %s: vhost-net %s, tap offloads %v, vdpa %v", k.Name, r.VhostNet.FeaturesHex, r.Tap.Offloads, r.VDPA.Available)
}

// TestVMProbeVDPADevice: on 6.12 the probe reports a vdpa device's driver
// and its own features (a VDUSE device with TX offloads only); on 6.1,
// which has no vdpa, it says so and reports no device.
func TestVMProbeVDPADevice(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vdpa") {
		if _, err := vdpa.Dial(context.Background()); err == nil {
			t.Fatalf("vdpa family on %s, which has none", k.Name)
		}
		r, err := Probe(nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.VDPA.Available || len(r.VDPA.Devices) != 0 || !strings.Contains(r.VDPA.Error, "no vdpa support") {
			t.Errorf("vdpa on %s: %+v", k.Name, r.VDPA)
		}
		return
	}
	feats := vduse.DefaultFeatures | virtio.NetCsum | virtio.NetHostTSO4 | virtio.NetHostTSO6 | virtio.NetHostECN
	dev, err := vduse.Create(vduse.Config{Name: "probevdpa0", Features: feats})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := vdpa.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AddDevice(context.Background(), vdpa.AddOptions{Name: "probevdpa0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteDevice(context.Background(), "probevdpa0")
	// The VM has no hostname ("(none)", which netctl plan refuses); name
	// it, so that the logged probe is a document plan takes
	// (policy/testdata/probe-6.12-vdpa.json).
	if err := unix.Sethostname([]byte("vm-6-12-vdpa")); err != nil {
		t.Fatal(err)
	}
	r, err := ProbeFull(nil) // what netctl probe -j writes
	if err != nil {
		t.Fatal(err)
	}
	if r.Hostname != "vm-6-12-vdpa" {
		t.Errorf("hostname %q", r.Hostname)
	}
	i := slices.IndexFunc(r.VDPA.Devices, func(d host.VDPADevice) bool { return d.Name == "probevdpa0" })
	if i < 0 {
		t.Fatalf("no probevdpa0 in %+v", r.VDPA)
	}
	d := r.VDPA.Devices[i]
	if f, ok := d.FeatureWord(); !ok || f != feats || d.Driver != vdpa.DriverVhostVDPA || d.Error != "" {
		t.Errorf("device %+v: features %v, want %v on %s", d, f, feats, vdpa.DriverVhostVDPA)
	}
	b, _ := json.Marshal(r)
	t.Logf("probe with a vdpa device: %s", b)
}

// TestVMBusyPollIsMeasured: busy-poll is asked of the kernel, not assumed.
// On a fresh device the timeout set on ring 0 reads back (and is put back
// to 0); on a device whose owner is already set, the measurement's own
// SET_OWNER is refused (EBUSY) and the probe reports it as not measured
// instead of a guess.
func TestVMBusyPollIsMeasured(t *testing.T) {
	testenv.VM(t)
	d, err := vhostnet.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ok, err := measureBusyPoll(d); !ok || err != nil {
		t.Fatalf("fresh device: busy-poll %v, %v; want measured as working", ok, err)
	}
	if v, err := d.BusyLoopTimeout(0); v != 0 || err != nil {
		t.Errorf("ring 0's busy-poll timeout after the measurement: %d, %v; want 0 again", v, err)
	}
	owned, err := vhostnet.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer owned.Close()
	if err := owned.SetOwner(); err != nil {
		t.Fatal(err)
	}
	ok, err := measureBusyPoll(owned)
	if ok || err == nil || !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "busy-poll not measured") {
		t.Errorf("device with an owner: busy-poll %v, %v; want not measured, EBUSY", ok, err)
	}
}
