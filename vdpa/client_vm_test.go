package vdpa

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
)

// TestVMVDUSELifecycle: a VDUSE net device added as a vdpa device, shown,
// configured, bound to vhost_vdpa, deleted and destroyed, nothing left.
func TestVMVDUSELifecycle(t *testing.T) {
	k := testenv.VM(t)
	c, err := Dial(bg)
	if !k.Has("vdpa") {
		if !errors.Is(err, ErrNoVDPA) || !strings.Contains(err.Error(), "this kernel has no vdpa support") {
			t.Fatalf("kernel %s has no vdpa: Dial gave %v, want ErrNoVDPA saying so", k.Name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("kernel %s has vdpa: %v", k.Name, err)
	}
	defer c.Close()
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
	if err == nil || !strings.Contains(err.Error(), "takes no mac, mtu") {
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
	if _, _, err := c.VStats(bg, "vdpatest0", 0); err == nil {
		t.Error("vstats on a VDUSE device: no error")
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
// family does not exist, and Dial says why.
func TestVMFamilyOnlyInInitialNetns(t *testing.T) {
	k := testenv.VM(t)
	if !k.Has("vdpa") {
		return
	}
	testenv.Host(t) // a new network namespace
	_, err := Dial(bg)
	if !errors.Is(err, ErrNoVDPA) || !strings.Contains(err.Error(), "only in the initial network namespace") {
		t.Errorf("Dial in a new network namespace: %v", err)
	}
}
