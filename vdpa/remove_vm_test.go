package vdpa

import (
	"errors"
	"os"
	"testing"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/vduse"
)

// TestVMRemove: Remove deletes a VDUSE vdpa device and is no error for a
// device that is not there (again, or never added). On a kernel without
// vdpa (6.1) it fails as Dial does, with ErrNoVDPA.
func TestVMRemove(t *testing.T) {
	testenv.Require(t, "vdpa", func(m *testenv.Missing) {
		m.Helper()
		err := Remove(bg, "rmtest0")
		m.Check(errors.Is(err, ErrNoVDPA), "Remove on a kernel without vdpa: %v, want ErrNoVDPA", err)
	})
	c, err := Dial(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev, err := vduse.Create(vduse.Config{Name: "rmtest0"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := c.AddDevice(bg, AddOptions{Name: "rmtest0", MgmtDev: "vduse"}); err != nil {
		t.Fatal(err)
	}
	if err := Remove(bg, "rmtest0"); err != nil {
		t.Fatalf("Remove of an added device: %v", err)
	}
	if _, err := c.Device(bg, "rmtest0"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove, dev show: %v, want not there", err)
	}
	if err := Remove(bg, "rmtest0"); err != nil {
		t.Errorf("Remove of a removed device: %v, want no error", err)
	}
	if err := Remove(bg, "nctl-never-added"); err != nil {
		t.Errorf("Remove of a device never added: %v, want no error", err)
	}
}
