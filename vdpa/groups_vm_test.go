package vdpa

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// TestVMVhostVDPAGroups: what a VDUSE device answers on Linux 6.12 about
// the facts QEMU's shadow virtqueues need (kernel facts §3.6): backend
// features IOTLB_MSG_V2|IOTLB_BATCH|IOTLB_ASID (vhost-vdpa offers ASID
// for every parent) without SUSPEND or RESUME, one virtqueue group, one
// address space, and no VHOST_VDPA_GET_VRING_GROUP (VDUSE has no
// get_vq_group: ErrNotSupported), which the kernel answers only to the
// fd's owner (EPERM before SetOwner).
func TestVMVhostVDPAGroups(t *testing.T) {
	c := vdpaClient(t, "vhost_vdpa")
	dev, path := addVDUSE(t, c, "grpvdpa0")
	defer func() { c.DeleteDevice(bg, "grpvdpa0"); dev.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := OpenVhost(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := uint64(1)<<linux.VHOST_BACKEND_F_IOTLB_MSG_V2 | 1<<linux.VHOST_BACKEND_F_IOTLB_BATCH | 1<<linux.VHOST_BACKEND_F_IOTLB_ASID
	if bf, err := d.BackendFeatures(); err != nil || bf != want {
		t.Errorf("backend features %#x, %v; want %#x", bf, err, want)
	}
	if n, err := d.GroupNum(); n != 1 || err != nil {
		t.Errorf("groups %d, %v; want 1", n, err)
	}
	if n, err := d.ASNum(); n != 1 || err != nil {
		t.Errorf("address spaces %d, %v; want 1", n, err)
	}
	if _, err := d.VringGroup(0); !errors.Is(err, unix.EPERM) {
		t.Errorf("vring group before SET_OWNER: %v, want EPERM", err)
	}
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	if g, err := d.VringGroup(0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("vring group of a VDUSE queue: %d, %v; want ErrNotSupported", g, err)
	}
	if _, err := d.VringGroup(2); !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("vring group of queue 2 of 2: %v, want ENOBUFS", err)
	}
	d.Close()
	if _, err := d.GroupNum(); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
