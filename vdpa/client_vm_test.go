package vdpa

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
)

// assertNoVDPA checks what a kernel without vDPA (6.1) answers: no vdpa
// family, no VDUSE control device, no vhost-vdpa node, each with an error
// that says so. testenv.Require runs it where the capability is missing.
func assertNoVDPA(m *testenv.Missing) {
	m.Helper()
	_, err := Dial(bg)
	m.Err(err, ErrNotAvailable, "this kernel has no vdpa support")
	m.Check(errors.Is(err, ErrNoVDPA), "Dial gave %v, want ErrNoVDPA", err)
	_, err = os.Stat(SysfsDevices)
	m.Check(errors.Is(err, os.ErrNotExist), "%s: %v, want it absent", SysfsDevices, err)
	d, err := vduse.Create(vduse.Config{Name: "novdpa0"})
	if d != nil {
		d.Close()
	}
	m.Err(err, unix.ENOENT, "load the vduse module")
	vd, err := OpenVhost(bg, "/dev/vhost-vdpa-0")
	if vd != nil {
		vd.Close()
	}
	m.Err(err, unix.ENOENT, "bind the vdpa device to vhost_vdpa")
}

// vdpaClient is the prologue of the VM tests that need capability c
// (vdpa or vhost_vdpa): on a kernel without it the test checks the
// kernel's answers (assertNoVDPA) and ends there; otherwise it returns a
// client of the vdpa family, closed when the test ends.
func vdpaClient(t *testing.T, c string) *Client {
	t.Helper()
	k := testenv.Require(t, c, assertNoVDPA)
	cl, err := Dial(bg)
	if err != nil {
		t.Fatalf("kernel %s has %s: %v", k.Name, c, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestVMVDUSELifecycle: a VDUSE net device added as a vdpa device, shown,
// configured, bound to vhost_vdpa, deleted and destroyed, nothing left.
func TestVMVDUSELifecycle(t *testing.T) {
	c := vdpaClient(t, "vdpa")
	mds, err := c.MgmtDevs(bg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mds, func(m MgmtDev) bool { return m.Name == "vduse" })
	if i < 0 || !slices.Equal(mds[i].Classes, []string{"net", "block"}) || mds[i].BusName != "" {
		t.Fatalf("management devices %+v: want vduse with classes net and block", mds)
	}
	dev, err := vduse.Create(vduse.Config{Name: "vdpatest0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	// VDUSE takes no config attributes: the error says so.
	err = c.AddDevice(bg, AddOptions{Name: "vdpatest0", MgmtDev: "vduse", MTU: 9000})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "takes no mac, mtu") {
		t.Errorf("dev add with mtu on vduse: %v", err)
	}
	if err := c.AddDevice(bg, AddOptions{Name: "vdpatest0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Device(bg, "vdpatest0")
	if err != nil {
		t.Fatal(err)
	}
	if d.Type() != "network" || d.MgmtDev != "vduse" || d.MaxVQs != 2 || d.MaxVQSize != 256 {
		t.Errorf("device %+v", d)
	}
	all, _ := c.Devices(bg)
	if !slices.ContainsFunc(all, func(x Device) bool { return x.Name == "vdpatest0" }) {
		t.Errorf("dev show lists %+v", all)
	}
	cfg, err := c.Config(bg, "vdpatest0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MAC.String() != "02:00:00:00:0d:01" || !cfg.HasStatus || !cfg.LinkUp || cfg.MTU != 1500 ||
		cfg.Features != vduse.DefaultFeatures {
		t.Errorf("config %+v (features %v)", cfg, cfg.Features)
	}
	if _, _, err := c.VStats(bg, "vdpatest0", 0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("vstats on a VDUSE device: %v, want ErrNotSupported", err)
	}
	// vhost_vdpa was loaded before virtio_vdpa, so it took the device.
	if drv, err := BoundDriver("vdpatest0"); err != nil || drv != DriverVhostVDPA {
		t.Errorf("bound to %q, %v; want vhost_vdpa", drv, err)
	}
	path, err := VhostVDPAPath("vdpatest0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	// Rebind through driver_override, both ways.
	if err := Bind("vdpatest0", DriverVirtioVDPA); err != nil {
		t.Fatal(err)
	}
	if _, err := VhostVDPAPath("vdpatest0"); err == nil || !strings.Contains(err.Error(), "bound to virtio_vdpa") {
		t.Errorf("after binding virtio_vdpa: %v", err)
	}
	if err := Bind("vdpatest0", DriverVhostVDPA); err != nil {
		t.Fatal(err)
	}
	if _, err := VhostVDPAPath("vdpatest0"); err != nil {
		t.Error(err)
	}
	checkBindUndo(t, "vdpatest0")
	if dev.Requests() == 0 {
		t.Error("the VDUSE device answered no control message")
	}
	if err := c.DeleteDevice(bg, "vdpatest0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Device(bg, "vdpatest0"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after delete: %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/dev/vduse/vdpatest0"); err == nil {
		t.Error("/dev/vduse/vdpatest0 left behind")
	}
}

// TestVMFamilyOnlyInInitialNetns: in another network namespace the vdpa
// family does not exist, and Dial says why; without vdpa in the kernel
// it says that instead, in any namespace.
func TestVMFamilyOnlyInInitialNetns(t *testing.T) {
	k := testenv.VM(t)
	testenv.Host(t) // a new network namespace
	_, err := Dial(bg)
	want := "only in the initial network namespace"
	if !k.Has("vdpa") {
		want = "this kernel has no vdpa support"
	}
	if !errors.Is(err, ErrNoVDPA) || !strings.Contains(err.Error(), want) {
		t.Errorf("kernel %s: Dial in a new network namespace: %v, want ErrNoVDPA saying %q", k.Name, err, want)
	}
}

// checkBindUndo makes each sysfs write of a rebind fail in turn, on the
// real vdpa bus, and checks that the device is back on its driver with
// its driver_override as it was; a driver that does not exist changes
// nothing.
func checkBindUndo(t *testing.T, name string) {
	t.Helper()
	dev := filepath.Join(SysfsDevices, name)
	before, err := BoundDriver(name)
	if err != nil || before == "" {
		t.Fatalf("bound to %q, %v", before, err)
	}
	override := func() string {
		b, err := os.ReadFile(filepath.Join(dev, "driver_override"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	prev := override()
	other := DriverVirtioVDPA
	if before == DriverVirtioVDPA {
		other = DriverVhostVDPA
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: Bind succeeded", what)
		}
		if now, _ := BoundDriver(name); now != before {
			t.Errorf("%s (%v): bound to %q after the failure, want %q", what, err, now, before)
		}
		if got := override(); got != prev {
			t.Errorf("%s: driver_override %q after the failure, want %q", what, got, prev)
		}
	}
	check("driver that does not exist", Bind(name, "no_such_vdpa_driver"))
	injected := errors.New("injected failure")
	for _, step := range []string{"unbind", "driver_override", "bind"} {
		err := bindWith(name, other, func(path string, b []byte) error {
			if filepath.Base(path) == step && !strings.Contains(string(b), "\n") && (step != "bind" || strings.Contains(path, other)) {
				return injected
			}
			return writeSysfs(path, b)
		})
		if !errors.Is(err, injected) {
			t.Errorf("failing %s: %v, want the injected error", step, err)
		}
		check("failing "+step, err)
	}
}
