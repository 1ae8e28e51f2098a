// Package vhost holds the ioctls every vhost device shares (vhost-net and
// vhost-vdpa): owner, features and virtqueue setup, on an fd the caller
// owns. Errors name the device and the virtqueue.
package vhost

import (
	"fmt"
	"unsafe"

	"github.com/netctl/netctl/internal/linux"
)

// Dev is a vhost fd. It does not own the fd.
type Dev struct {
	FD   int
	Name string // prefix for errors ("vhost-vdpa /dev/vhost-vdpa-0"), or none
}

func (d Dev) wrap(err error) error {
	if err == nil || d.Name == "" {
		return err
	}
	return fmt.Errorf("%s: %w", d.Name, err)
}

func (d Dev) vq(idx uint32, err error) error {
	if err == nil {
		return nil
	}
	return d.wrap(fmt.Errorf("vq %d: %w", idx, err))
}

// SetOwner is VHOST_SET_OWNER, with the thread's signals blocked: since
// Linux 6.4 vhost-net's SET_OWNER forks its worker from the calling
// thread, and the fork gives up (ENOMEM) when a signal is pending.
func (d Dev) SetOwner() error {
	return d.wrap(linux.WithSignalsBlocked(func() error { return linux.IoctlValue(d.FD, linux.VHOST_SET_OWNER, 0) }))
}

// SetOwnerNoWorker is VHOST_SET_OWNER for a device that starts no worker
// thread (vhost-vdpa: its vhost_dev has use_worker false), which needs no
// signals blocked.
func (d Dev) SetOwnerNoWorker() error {
	return d.wrap(linux.IoctlValue(d.FD, linux.VHOST_SET_OWNER, 0))
}

// Features is VHOST_GET_FEATURES.
func (d Dev) Features() (uint64, error) {
	v, err := linux.GetU64(d.FD, linux.VHOST_GET_FEATURES)
	return v, d.wrap(err)
}

// SetFeatures is VHOST_SET_FEATURES.
func (d Dev) SetFeatures(f uint64) error {
	return d.wrap(linux.SetU64(d.FD, linux.VHOST_SET_FEATURES, f))
}

// BackendFeatures is VHOST_GET_BACKEND_FEATURES.
func (d Dev) BackendFeatures() (uint64, error) {
	v, err := linux.GetU64(d.FD, linux.VHOST_GET_BACKEND_FEATURES)
	return v, d.wrap(err)
}

// SetBackendFeatures is VHOST_SET_BACKEND_FEATURES.
func (d Dev) SetBackendFeatures(f uint64) error {
	return d.wrap(linux.SetU64(d.FD, linux.VHOST_SET_BACKEND_FEATURES, f))
}

func (d Dev) state(req linux.Request, idx, num uint32) (uint32, error) {
	s := linux.VhostVringState{Index: idx, Num: num}
	err := linux.Ioctl(d.FD, req, unsafe.Pointer(&s))
	return s.Num, d.vq(idx, err)
}

func (d Dev) file(req linux.Request, idx uint32, fd int) error {
	f := linux.VhostVringFile{Index: idx, FD: int32(fd)}
	return d.vq(idx, linux.Ioctl(d.FD, req, unsafe.Pointer(&f)))
}

// SetVringNum, SetVringBase, VringBase, SetVringAddr, SetVringKick,
// SetVringCall and SetVringErr are the VHOST_*_VRING_* ioctls.
func (d Dev) SetVringNum(idx, num uint32) error {
	_, err := d.state(linux.VHOST_SET_VRING_NUM, idx, num)
	return err
}

func (d Dev) SetVringBase(idx uint32, base uint16) error {
	_, err := d.state(linux.VHOST_SET_VRING_BASE, idx, uint32(base))
	return err
}

func (d Dev) VringBase(idx uint32) (uint16, error) {
	v, err := d.state(linux.VHOST_GET_VRING_BASE, idx, 0)
	return uint16(v), err
}

// SetVringAddr sets a ring's addresses (process addresses for vhost-net
// without ACCESS_PLATFORM, IOVAs with it and for vhost-vdpa).
func (d Dev) SetVringAddr(idx uint32, desc, avail, used, log uint64, logUsed bool) error {
	a := linux.VhostVringAddr{Index: idx, DescUserAddr: desc, AvailUserAddr: avail, UsedUserAddr: used, LogGuestAddr: log}
	if logUsed {
		a.Flags = 1 << linux.VHOST_VRING_F_LOG
	}
	return d.vq(idx, linux.Ioctl(d.FD, linux.VHOST_SET_VRING_ADDR, unsafe.Pointer(&a)))
}

func (d Dev) SetVringKick(idx uint32, fd int) error {
	return d.file(linux.VHOST_SET_VRING_KICK, idx, fd)
}
func (d Dev) SetVringCall(idx uint32, fd int) error {
	return d.file(linux.VHOST_SET_VRING_CALL, idx, fd)
}
func (d Dev) SetVringErr(idx uint32, fd int) error { return d.file(linux.VHOST_SET_VRING_ERR, idx, fd) }

// State runs a vhost_vring_state ioctl (for device-specific ones such as
// VHOST_VDPA_SET_VRING_ENABLE or VHOST_SET_VRING_BUSYLOOP_TIMEOUT).
func (d Dev) State(req linux.Request, idx, num uint32) (uint32, error) { return d.state(req, idx, num) }

// File runs a vhost_vring_file ioctl (VHOST_NET_SET_BACKEND, ...).
func (d Dev) File(req linux.Request, idx uint32, fd int) error { return d.file(req, idx, fd) }
