package vhostnet

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
	"github.com/netctl/netctl/virtio"
)

// DevicePath is the vhost-net character device (misc 10:238).
const DevicePath = "/dev/vhost-net"

// Device is one /dev/vhost-net fd: one queue pair. Its methods are safe for
// concurrent use; Close is idempotent.
type Device struct {
	mu       sync.Mutex      // guards fd, acked and backends
	fd       int             // valid while open
	open     bool            // set by Open, cleared by Close: a zero Device is closed, not fd 0
	acked    virtio.Features // the last features SetFeatures set (vhost-net cannot read them back)
	backends [2]int          // the backend fd attached to RX and TX, -1 for none (not owned)
}

// Open opens /dev/vhost-net. The error says what to do when the device is
// missing (load vhost_net) or not permitted (root, or the device's group).
func Open() (*Device, error) {
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(err)
	}
	return &Device{fd: fd, open: true, backends: [2]int{-1, -1}}, nil
}

func openError(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("vhost-net: %s: %w: %w: this kernel has no vhost-net loaded; "+
			"run 'modprobe vhost_net' (CONFIG_VHOST_NET) or use the VMM's userspace virtio-net", DevicePath, ErrNotAvailable, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("vhost-net: %s: %w: %w: run as root, or give this user read-write access to %s "+
			"(usually its group, e.g. kvm)", DevicePath, ErrNotAvailable, err, DevicePath)
	}
	return fmt.Errorf("vhost-net: open %s: %w", DevicePath, err)
}

func (d *Device) ioctl(req linux.Request, f func(fd int) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.open {
		return fmt.Errorf("vhost-net: %v: %w: the device was closed (or never opened: use Open)", req, ErrClosed)
	}
	if err := f(d.fd); err != nil {
		return fmt.Errorf("vhost-net: %w", err)
	}
	return nil
}

// SetOwner makes the calling process the owner of the device
// (VHOST_SET_OWNER) and starts its worker. A second call fails with EBUSY.
//
// The ioctl runs with signals blocked: on Linux 6.4+ the worker is forked
// from the caller, and a pending signal (Go's preemption SIGURG) makes that
// fork, and so SET_OWNER, fail with a spurious ENOMEM.
func (d *Device) SetOwner() error {
	return d.ioctl(linux.VHOST_SET_OWNER, func(fd int) error {
		return vhost.Dev{FD: fd}.SetOwner()
	})
}

// Features returns the features the device offers (VHOST_GET_FEATURES):
// 0x1033d008000 on Linux 6.12.
func (d *Device) Features() (virtio.Features, error) {
	var v uint64
	err := d.ioctl(linux.VHOST_GET_FEATURES, func(fd int) (err error) {
		v, err = linux.GetU64(fd, linux.VHOST_GET_FEATURES)
		return err
	})
	return virtio.Features(v), err
}

// FD returns the device's fd, still owned by the Device (for handing to a
// VMM, duplicate it), or -1 when the Device is closed.
func (d *Device) FD() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.open {
		return -1
	}
	return d.fd
}

// Close closes the fd; later calls return an error wrapping ErrClosed. Closing twice is
// not an error.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.open {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd, d.open = -1, false
	return err
}
