package vduse

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
)

func TestVMControlDevice(t *testing.T) {
	k := testenv.VM(t)
	v, err := APIVersion()
	if !k.Has("vduse") {
		if !errors.Is(err, unix.ENOENT) {
			t.Fatalf("kernel %s has no VDUSE, yet %s answered: %v, %v", k.Name, ControlPath, v, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("kernel %s has VDUSE: %v", k.Name, err)
	}
	if v != linux.VDUSE_API_VERSION {
		t.Errorf("VDUSE API version %d, want %d", v, linux.VDUSE_API_VERSION)
	}
}
