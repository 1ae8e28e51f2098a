package vhostnet

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// SetFeatures acknowledges features (VHOST_SET_FEATURES). When the kernel
// refuses bits it does not offer (a bare EOPNOTSUPP), the error names them.
//
// Do not pass the guest's ANY_LAYOUT on: bit 27 is also
// VHOST_NET_F_VIRTIO_NET_HDR and makes vhost add and strip the virtio-net
// header itself, which is right only for a backend without a header of its
// own (a tap without IFF_VNET_HDR, a packet socket without
// PACKET_VNET_HDR). With a backend attached that has one, SetFeatures
// refuses bit 27 with ErrInvalid and changes nothing; SetBackend refuses
// such a backend once bit 27 is set.
//
// The kernel cannot report the acknowledged word back (VHOST_GET_FEATURES
// returns what vhost-net offers); Acked returns what was last set.
func (d *Device) SetFeatures(f virtio.Features) error {
	err := d.ioctl(linux.VHOST_SET_FEATURES, func(fd int) error {
		for vq, b := range d.backends {
			if err := checkHeader(f, b); err != nil {
				return fmt.Errorf("vq %d: %w", vq, err)
			}
		}
		if err := linux.SetU64(fd, linux.VHOST_SET_FEATURES, uint64(f)); err != nil {
			return err
		}
		d.acked = f
		return nil
	})
	if errors.Is(err, unix.EOPNOTSUPP) {
		if offered, gerr := d.Features(); gerr == nil && f&^offered != 0 {
			return fmt.Errorf("vhost-net: features %v are not offered by this kernel's vhost-net (it offers %v): mask the guest's features first: %w",
				f&^offered, offered, err)
		}
	}
	return err
}

// BackendFeatures returns VHOST_GET_BACKEND_FEATURES (IOTLB_MSG_V2 for
// vhost-net).
func (d *Device) BackendFeatures() (uint64, error) {
	var v uint64
	err := d.ioctl(linux.VHOST_GET_BACKEND_FEATURES, func(fd int) (err error) {
		v, err = linux.GetU64(fd, linux.VHOST_GET_BACKEND_FEATURES)
		return err
	})
	return v, err
}

// ResetOwner stops the device, detaches both backends, resets the rings and
// drops the owner (VHOST_RESET_OWNER); SetOwner may then be called again.
func (d *Device) ResetOwner() error {
	return d.ioctl(linux.VHOST_RESET_OWNER, func(fd int) error {
		if err := linux.IoctlValue(fd, linux.VHOST_RESET_OWNER, 0); err != nil {
			return err
		}
		d.acked, d.backends = 0, [2]int{-1, -1}
		return nil
	})
}

// Acked returns the features the last successful SetFeatures set (0 after
// ResetOwner). vhost-net has no call that reads them back.
func (d *Device) Acked() virtio.Features {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked
}

// SetForkFromOwner chooses how vhost's worker is created
// (VHOST_SET_FORK_FROM_OWNER): task=true makes it a task forked from the
// owner (it inherits cgroups and counts against RLIMIT_NPROC), false a
// kernel thread. It must come before SetOwner. Kernels without
// CONFIG_VHOST_ENABLE_FORK_OWNER_CONTROL (upstream 6.17, backported to
// some stable trees such as 6.12.117) return an error wrapping
// ErrNotSupported.
func (d *Device) SetForkFromOwner(task bool) error {
	// The argument is a u8, but a kernel without the ioctl reads a u32 vq
	// index from it (vhost_vring_ioctl): pass 4 defined bytes.
	var v [4]uint8
	if task {
		v[0] = linux.VHOST_FORK_OWNER_TASK
	}
	err := d.ioctl(linux.VHOST_SET_FORK_FROM_OWNER, func(fd int) error {
		return linux.Ioctl(fd, linux.VHOST_SET_FORK_FROM_OWNER, unsafe.Pointer(&v[0]))
	})
	return forkErr(err)
}

// ForkFromOwner reports whether the worker is forked from the owner (true)
// or a kernel thread (false).
func (d *Device) ForkFromOwner() (bool, error) {
	var v [4]uint8
	err := d.ioctl(linux.VHOST_GET_FORK_FROM_OWNER, func(fd int) error {
		return linux.Ioctl(fd, linux.VHOST_GET_FORK_FROM_OWNER, unsafe.Pointer(&v[0]))
	})
	return v[0] == linux.VHOST_FORK_OWNER_TASK, forkErr(err)
}

func forkErr(err error) error {
	switch {
	case err == nil:
		return nil
	// A kernel without the ioctl hands it to the generic vhost code, which
	// answers EPERM before SetOwner and ENOTTY after; the real ioctl
	// returns neither.
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %w: fork-from-owner control needs CONFIG_VHOST_ENABLE_FORK_OWNER_CONTROL (Linux 6.17, or a stable kernel with the backport)", err, ErrNotSupported)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%w: set fork-from-owner before SetOwner", err)
	}
	return err
}
