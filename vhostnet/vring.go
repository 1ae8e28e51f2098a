package vhostnet

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
)

// Virtqueue indexes of a vhost-net device: one fd drives one queue pair.
const (
	RX = linux.VHOST_NET_VQ_RX // 0: host to guest
	TX = linux.VHOST_NET_VQ_TX // 1: guest to host
)

// MaxVringNum is the largest ring size vhost accepts (a power of two).
const MaxVringNum = 32768

// VringAddr holds a split virtqueue's addresses. Desc, Avail and Used are
// virtual addresses in the owner process (not guest-physical); Log is the
// guest-physical address of the used ring for dirty logging.
type VringAddr struct {
	Desc, Avail, Used uint64
	Log               uint64
	LogUsed           bool // VHOST_VRING_F_LOG: log writes to the used ring
}

func checkVringNum(idx, num uint32) error {
	if num == 0 || num > MaxVringNum || num&(num-1) != 0 {
		return fmt.Errorf("vhost-net: vq %d: ring size %d: %w: use a power of two from 1 to %d", idx, num, ErrInvalid, MaxVringNum)
	}
	return nil
}

func checkVringAddr(idx uint32, a VringAddr) error {
	if a.Avail%2 != 0 || a.Used%4 != 0 || a.Log%4 != 0 {
		return fmt.Errorf("vhost-net: vq %d: ring addresses misaligned (avail %#x must be 2-aligned, used %#x and log %#x 4-aligned): %w",
			idx, a.Avail, a.Used, a.Log, ErrInvalid)
	}
	return nil
}

// vringState and vringFile run a vring ioctl through internal/vhost under
// the device's lock.
func (d *Device) vringState(req linux.Request, idx, num uint32) (v uint32, err error) {
	err = d.ioctl(req, func(fd int) (err error) {
		v, err = vhost.Dev{FD: fd}.State(req, idx, num)
		return err
	})
	return v, err
}

func (d *Device) vringFile(req linux.Request, idx uint32, fd int) error {
	return d.ioctl(req, func(dfd int) error {
		return vhost.Dev{FD: dfd}.File(req, idx, fd)
	})
}

// SetVringNum sets the ring size of virtqueue idx (VHOST_SET_VRING_NUM):
// a power of two from 1 to 32768, set before a backend is attached.
func (d *Device) SetVringNum(idx, num uint32) error {
	if err := checkVringNum(idx, num); err != nil {
		return err
	}
	_, err := d.vringState(linux.VHOST_SET_VRING_NUM, idx, num)
	return busyHint(err)
}

// SetVringBase sets where vhost starts reading the avail ring
// (VHOST_SET_VRING_BASE; last_avail_idx).
func (d *Device) SetVringBase(idx uint32, base uint16) error {
	_, err := d.vringState(linux.VHOST_SET_VRING_BASE, idx, uint32(base))
	return busyHint(err)
}

// VringBase returns the next avail index vhost would read
// (VHOST_GET_VRING_BASE). It does not stop the ring: detach the backend
// first, as QEMU does, to read a stable value.
func (d *Device) VringBase(idx uint32) (uint16, error) {
	v, err := d.vringState(linux.VHOST_GET_VRING_BASE, idx, 0)
	return uint16(v), err
}

// SetVringAddr sets the ring addresses (VHOST_SET_VRING_ADDR). Avail must
// be 2-aligned, Used and Log 4-aligned.
func (d *Device) SetVringAddr(idx uint32, a VringAddr) error {
	if err := checkVringAddr(idx, a); err != nil {
		return err
	}
	return d.ioctl(linux.VHOST_SET_VRING_ADDR, func(fd int) error {
		return vhost.Dev{FD: fd}.SetVringAddr(idx, a.Desc, a.Avail, a.Used, a.Log, a.LogUsed)
	})
}

// SetVringKick sets the eventfd the driver writes to kick vq idx; -1 unbinds.
func (d *Device) SetVringKick(idx uint32, eventfd int) error {
	return d.vringFile(linux.VHOST_SET_VRING_KICK, idx, eventfd)
}

// SetVringCall sets the eventfd vhost signals after using buffers of vq
// idx; -1 unbinds (the driver then polls the used ring).
func (d *Device) SetVringCall(idx uint32, eventfd int) error {
	return d.vringFile(linux.VHOST_SET_VRING_CALL, idx, eventfd)
}

// SetVringErr sets the eventfd vhost signals on a ring error; -1 unbinds.
func (d *Device) SetVringErr(idx uint32, eventfd int) error {
	return d.vringFile(linux.VHOST_SET_VRING_ERR, idx, eventfd)
}

// SetBusyLoopTimeout sets how long (µs) vhost busy-polls vq idx before
// sleeping (VHOST_SET_VRING_BUSYLOOP_TIMEOUT, Linux 4.6); 0 turns polling
// off. A kernel without the ioctl gives an error wrapping ErrNotSupported.
func (d *Device) SetBusyLoopTimeout(idx, usec uint32) error {
	_, err := d.vringState(linux.VHOST_SET_VRING_BUSYLOOP_TIMEOUT, idx, usec)
	return busyLoopErr(err)
}

// BusyLoopTimeout reads the busy-poll timeout of vq idx back
// (VHOST_GET_VRING_BUSYLOOP_TIMEOUT, Linux 4.6); ErrNotSupported as for
// SetBusyLoopTimeout.
func (d *Device) BusyLoopTimeout(idx uint32) (uint32, error) {
	v, err := d.vringState(linux.VHOST_GET_VRING_BUSYLOOP_TIMEOUT, idx, 0)
	return v, busyLoopErr(err)
}

// busyLoopErr maps the ENOTTY of a kernel that does not know the
// busy-loop ioctls (before Linux 4.6) to ErrNotSupported, so that callers
// test errors.Is(err, ErrNotSupported), not the errno.
func busyLoopErr(err error) error {
	if errors.Is(err, unix.ENOTTY) {
		return fmt.Errorf("%w: %w: vhost busy-polling needs Linux 4.6", err, ErrNotSupported)
	}
	return err
}

// SetBackend attaches a backend socket to vq idx (VHOST_NET_SET_BACKEND):
// a tap or macvtap queue fd, or an AF_PACKET SOCK_RAW socket. The ring must
// be set up (num, addresses) first, or the kernel answers EFAULT. The
// Device does not take ownership of fd.
//
// With bit 27 (VHOST_NET_F_VIRTIO_NET_HDR) acknowledged, a backend with a
// virtio-net header of its own is refused with ErrInvalid (see
// SetFeatures) before the kernel is asked.
func (d *Device) SetBackend(idx uint32, fd int) error {
	err := d.ioctl(linux.VHOST_NET_SET_BACKEND, func(dfd int) error {
		if err := checkHeader(d.acked, fd); err != nil {
			return fmt.Errorf("vq %d: %w", idx, err)
		}
		if err := (vhost.Dev{FD: dfd}).File(linux.VHOST_NET_SET_BACKEND, idx, fd); err != nil {
			return err
		}
		if idx < uint32(len(d.backends)) {
			d.backends[idx] = fd
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOTSOCK):
		return fmt.Errorf("%w: fd %d is not a tap, macvtap or packet socket", err, fd)
	case errors.Is(err, unix.EFAULT):
		return fmt.Errorf("%w: set up the ring (num, addresses and, with LOG_ALL, a log base) before attaching a backend", err)
	case errors.Is(err, unix.EPFNOSUPPORT), errors.Is(err, unix.ESOCKTNOSUPPORT):
		return fmt.Errorf("%w: a socket backend must be AF_PACKET, SOCK_RAW", err)
	}
	return err
}

// DetachBackend detaches vq idx from its backend (fd -1). Detach before
// reading VringBase to stop the ring.
func (d *Device) DetachBackend(idx uint32) error {
	return d.SetBackend(idx, linux.VHOST_FILE_UNBIND)
}

func busyHint(err error) error {
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%w: detach the backend first", err)
	}
	return err
}
