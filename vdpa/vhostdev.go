package vdpa

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
	"github.com/netctl/netctl/virtio"
)

// VhostDevice is an open /dev/vhost-vdpa-N: the VMM's side of a vDPA
// device. It owns its fd, which Close closes; every call after Close fails
// with ErrClosed instead of reaching whatever file later gets the same fd
// number. Close is safe to call concurrently with the other methods (it
// waits for a call in progress); the other methods are not safe for
// concurrent use with each other.
type VhostDevice struct {
	Path string // the path it was opened by

	mu              sync.RWMutex // guards fd: shared by each call that uses it, exclusive in Close
	fd              int          // -1 after Close
	dev             vhost.Dev    // fd and name for internal/vhost, made once at open
	backendFeatures atomic.Uint64
	rdev            uint64 // the node's device number, from fstat at open (0: not a char device)

	sysOnce sync.Once // finds name and mode in sysfs on first use
	name    string    // the vdpa device behind the node
	mode    MapMode
}

// OpenVhost opens a vhost-vdpa device (Linux 5.7+; the VMM's open of
// vhost-vdpa=/dev/vhost-vdpa-N). Opening sends the device a reset, which a
// VDUSE device must answer: when nothing answers within ctx's deadline,
// OpenVhost gives up with an error that says so (the kernel's own wait,
// msg_timeout, is 30 s, after which the device is broken for good).
//
// It finds out, by the node's device number, how the device's parent maps
// memory (see MapMode), so a node opened through any path (a copy made
// with mknod in a container's /dev) is treated alike.
func OpenVhost(ctx context.Context, path string) (*VhostDevice, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		ch <- result{fd, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if errors.Is(r.err, unix.ENOENT) {
				return nil, fmt.Errorf("vhost-vdpa: %s: %w: bind the vdpa device to vhost_vdpa", path, r.err)
			}
			if errors.Is(r.err, unix.EIO) {
				return nil, fmt.Errorf("vhost-vdpa: %s: %w: the device did not answer its reset (a VDUSE daemon that stopped?)", path, r.err)
			}
			if errors.Is(r.err, unix.EBUSY) {
				return nil, fmt.Errorf("vhost-vdpa: %s: %w: another process has it open (one open at a time): %w", path, ErrBusy, r.err)
			}
			return nil, fmt.Errorf("vhost-vdpa: open %s: %w", path, r.err)
		}
		d := newVhostDevice(r.fd, path)
		var st unix.Stat_t
		if unix.Fstat(r.fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			d.rdev = st.Rdev // sysfs is read when a caller needs the name or the map mode, even after Close
		}
		return d, nil
	case <-ctx.Done():
		go func() { // the open finishes when the kernel gives up; close it then
			if r := <-ch; r.err == nil {
				unix.Close(r.fd)
			}
		}()
		return nil, fmt.Errorf("vhost-vdpa: open %s: the device did not answer within the deadline "+
			"(a VDUSE device whose daemon stopped answering; the kernel marks it broken after msg_timeout): %w", path, ctx.Err())
	}
}

// newVhostDevice takes ownership of fd.
func newVhostDevice(fd int, path string) *VhostDevice {
	return &VhostDevice{Path: path, fd: fd, dev: vhost.Dev{FD: fd, Name: "vhost-vdpa " + path}}
}

// Close closes the fd (the kernel resets the device). Closing twice is not
// an error.
func (d *VhostDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return fmt.Errorf("vhost-vdpa %s: close: %w", d.Path, err)
	}
	return nil
}

// use runs f with the fd, or fails with ErrClosed after Close.
func (d *VhostDevice) use(f func(fd int, v vhost.Dev) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.fd < 0 {
		return fmt.Errorf("vhost-vdpa %s: %w", d.Path, ErrClosed)
	}
	return f(d.fd, d.dev)
}

func (d *VhostDevice) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("vhost-vdpa %s: %w", d.Path, err)
}

// MapMode says how the device's parent maps the IOTLB (see Map). It is
// found in sysfs, by the node's device number, on first use: a bring-up
// that maps only memory known to be shared (MapMemory) never pays for
// that walk (under TCG it cost as much as the rest of the bring-up).
func (d *VhostDevice) MapMode() MapMode {
	d.resolve()
	return d.mode
}

// DeviceName is the vdpa device behind the node, found through sysfs by
// the node's device number ("" when sysfs does not show it).
func (d *VhostDevice) DeviceName() string {
	d.resolve()
	return d.name
}

func (d *VhostDevice) resolve() {
	d.sysOnce.Do(func() {
		if d.rdev != 0 {
			d.name, d.mode = mapModeOfNode(SysfsRoot, d.rdev)
		}
	})
}

// The vhost ioctls every vhost device has (internal/vhost), on this fd.

// SetOwner is VHOST_SET_OWNER. vhost-vdpa starts no worker thread (its
// vhost_dev has use_worker false), so unlike vhost-net's SET_OWNER this
// one forks nothing and needs no signals blocked (vhost.Dev.SetOwner).
func (d *VhostDevice) SetOwner() error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetOwnerNoWorker() })
}

// Features is VHOST_GET_FEATURES, the device's features.
func (d *VhostDevice) Features() (uint64, error) {
	var f uint64
	err := d.use(func(_ int, v vhost.Dev) (err error) { f, err = v.Features(); return })
	return f, err
}

// DeviceFeatures returns the device's features, typed.
func (d *VhostDevice) DeviceFeatures() (virtio.Features, error) {
	f, err := d.Features()
	return virtio.Features(f), err
}

// SetFeatures is VHOST_SET_FEATURES.
func (d *VhostDevice) SetFeatures(f uint64) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetFeatures(f) })
}

// BackendFeatures is VHOST_GET_BACKEND_FEATURES.
func (d *VhostDevice) BackendFeatures() (uint64, error) {
	var f uint64
	err := d.use(func(_ int, v vhost.Dev) (err error) { f, err = v.BackendFeatures(); return })
	return f, err
}

// SetBackendFeatures is VHOST_SET_BACKEND_FEATURES.
func (d *VhostDevice) SetBackendFeatures(f uint64) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetBackendFeatures(f) })
}

// SetVringNum, SetVringBase, VringBase, SetVringAddr (IOVAs),
// SetVringKick, SetVringCall and SetVringErr are the VHOST_*_VRING_*
// ioctls.
func (d *VhostDevice) SetVringNum(idx, num uint32) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringNum(idx, num) })
}

func (d *VhostDevice) SetVringBase(idx uint32, base uint16) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringBase(idx, base) })
}

func (d *VhostDevice) VringBase(idx uint32) (uint16, error) {
	var b uint16
	err := d.use(func(_ int, v vhost.Dev) (err error) { b, err = v.VringBase(idx); return })
	return b, err
}

func (d *VhostDevice) SetVringAddr(idx uint32, desc, avail, used, log uint64, logUsed bool) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringAddr(idx, desc, avail, used, log, logUsed) })
}

func (d *VhostDevice) SetVringKick(idx uint32, fd int) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringKick(idx, fd) })
}

func (d *VhostDevice) SetVringCall(idx uint32, fd int) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringCall(idx, fd) })
}

func (d *VhostDevice) SetVringErr(idx uint32, fd int) error {
	return d.use(func(_ int, v vhost.Dev) error { return v.SetVringErr(idx, fd) })
}

// DeviceID is VHOST_VDPA_GET_DEVICE_ID (1 for net).
func (d *VhostDevice) DeviceID() (uint32, error) {
	var id uint32
	err := d.use(func(fd int, _ vhost.Dev) (err error) {
		id, err = linux.GetU32(fd, linux.VHOST_VDPA_GET_DEVICE_ID)
		return
	})
	return id, d.wrapUse(err)
}

// wrapUse adds the device's name to an ioctl's errno, not to ErrClosed
// (which already has it).
func (d *VhostDevice) wrapUse(err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return d.wrap(err)
}

// NegotiateBackend acknowledges the backend features netctl uses
// (IOTLB_MSG_V2, IOTLB_BATCH, and SUSPEND/RESUME when offered) and
// returns what was acknowledged.
func (d *VhostDevice) NegotiateBackend() (uint64, error) {
	offered, err := d.BackendFeatures()
	if err != nil {
		return 0, err
	}
	want := uint64(1)<<linux.VHOST_BACKEND_F_IOTLB_MSG_V2 | 1<<linux.VHOST_BACKEND_F_IOTLB_BATCH |
		1<<linux.VHOST_BACKEND_F_SUSPEND | 1<<linux.VHOST_BACKEND_F_RESUME
	ack := offered & want
	if ack&(1<<linux.VHOST_BACKEND_F_IOTLB_MSG_V2) == 0 {
		return 0, d.wrap(fmt.Errorf("the device lacks IOTLB_MSG_V2, which netctl needs: %w", ErrNotSupported))
	}
	if err := d.SetBackendFeatures(ack); err != nil {
		return 0, err
	}
	d.backendFeatures.Store(ack)
	return ack, nil
}

// Status reads the device status (VHOST_VDPA_GET_STATUS).
func (d *VhostDevice) Status() (uint8, error) {
	var s uint8
	err := d.use(func(fd int, _ vhost.Dev) error {
		return linux.Ioctl(fd, linux.VHOST_VDPA_GET_STATUS, unsafe.Pointer(&s))
	})
	return s, d.wrapUse(err)
}

// SetStatus writes the device status; 0 resets the device. Every other
// write is checked by reading the status back, as QEMU's vhost-vdpa does:
// a device may refuse a bit (FEATURES_OK for features it cannot take, a
// DRIVER_OK whose set-up failed in the parent driver or the VDUSE daemon)
// and keep its old status without the ioctl failing.
func (d *VhostDevice) SetStatus(s uint8) error {
	err := d.use(func(fd int, _ vhost.Dev) error {
		if err := linux.Ioctl(fd, linux.VHOST_VDPA_SET_STATUS, unsafe.Pointer(&s)); err != nil {
			return fmt.Errorf("status %#x: %w", s, err)
		}
		return nil
	})
	if err != nil || s == 0 {
		return d.wrapUse(err)
	}
	got, err := d.Status()
	if err != nil {
		return err
	}
	switch {
	case got&s == s:
		return nil
	case s&linux.VIRTIO_CONFIG_S_FEATURES_OK != 0 && got&linux.VIRTIO_CONFIG_S_FEATURES_OK == 0:
		return d.wrap(fmt.Errorf("the device refused the features (FEATURES_OK did not stick; status %#x): offer it fewer, or see why in its driver's messages (dmesg) or its VDUSE daemon", got))
	case s&linux.VIRTIO_CONFIG_S_DRIVER_OK != 0 && got&linux.VIRTIO_CONFIG_S_DRIVER_OK == 0:
		return d.wrap(fmt.Errorf("the device did not start (DRIVER_OK did not stick; status %#x): its driver's messages (dmesg) or its VDUSE daemon say why", got))
	default:
		return d.wrap(fmt.Errorf("status %#x did not stick (the device reads %#x): the device refused it; its driver's messages (dmesg) or its VDUSE daemon say why", s, got))
	}
}

// Reset sets status 0.
func (d *VhostDevice) Reset() error { return d.SetStatus(0) }

// maxConfigLen bounds a config read when the kernel cannot say the config
// size (a kernel without VHOST_VDPA_GET_CONFIG_SIZE): a page, VDUSE's
// limit on config_size.
const maxConfigLen = 4096

// ConfigSize is VHOST_VDPA_GET_CONFIG_SIZE.
func (d *VhostDevice) ConfigSize() (uint32, error) {
	var n uint32
	err := d.use(func(fd int, _ vhost.Dev) (err error) {
		n, err = linux.GetU32(fd, linux.VHOST_VDPA_GET_CONFIG_SIZE)
		return
	})
	return n, d.wrapUse(err)
}

// Config reads n bytes of config space at off (VHOST_VDPA_GET_CONFIG).
// off+n must lie within the config space (ConfigSize, or 4096 where the
// kernel cannot tell) and n must not be 0; otherwise the error wraps
// ErrInvalid and names the range.
func (d *VhostDevice) Config(off, n uint32) ([]byte, error) {
	size, err := d.ConfigSize()
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	if err != nil {
		size = maxConfigLen
	}
	if n == 0 || uint64(off)+uint64(n) > uint64(size) {
		return nil, d.wrap(fmt.Errorf("config read [%d, +%d): want 1..%d bytes within the %d-byte config space: %w",
			off, n, size, size, ErrInvalid))
	}
	buf := make([]byte, 8+int(n))
	binary.NativeEndian.PutUint32(buf[0:], off) // struct vhost_vdpa_config: host order
	binary.NativeEndian.PutUint32(buf[4:], n)
	err = d.use(func(fd int, _ vhost.Dev) error {
		return linux.Ioctl(fd, linux.VHOST_VDPA_GET_CONFIG, unsafe.Pointer(&buf[0]))
	})
	if err != nil {
		return nil, d.wrapUse(err)
	}
	return buf[8:], nil
}

// VQCount is VHOST_VDPA_GET_VQS_COUNT.
func (d *VhostDevice) VQCount() (uint32, error) {
	var n uint32
	err := d.use(func(fd int, _ vhost.Dev) (err error) {
		n, err = linux.GetU32(fd, linux.VHOST_VDPA_GET_VQS_COUNT)
		return
	})
	return n, d.wrapUse(err)
}

// MaxVringNum is VHOST_VDPA_GET_VRING_NUM, the largest ring size.
func (d *VhostDevice) MaxVringNum() (uint16, error) {
	var v uint16
	err := d.use(func(fd int, _ vhost.Dev) error {
		return linux.Ioctl(fd, linux.VHOST_VDPA_GET_VRING_NUM, unsafe.Pointer(&v))
	})
	return v, d.wrapUse(err)
}

// IOVARange is VHOST_VDPA_GET_IOVA_RANGE.
func (d *VhostDevice) IOVARange() (first, last uint64, err error) {
	var r linux.VhostVDPAIOVARange
	err = d.use(func(fd int, _ vhost.Dev) error {
		return linux.Ioctl(fd, linux.VHOST_VDPA_GET_IOVA_RANGE, unsafe.Pointer(&r))
	})
	return r.First, r.Last, d.wrapUse(err)
}

// EnableVring is VHOST_VDPA_SET_VRING_ENABLE.
func (d *VhostDevice) EnableVring(idx uint32, on bool) error {
	var n uint32
	if on {
		n = 1
	}
	return d.use(func(_ int, v vhost.Dev) error {
		_, err := v.State(linux.VHOST_VDPA_SET_VRING_ENABLE, idx, n)
		return err
	})
}

// SetConfigCall sets the eventfd for config-change interrupts; -1 unbinds.
func (d *VhostDevice) SetConfigCall(callFD int) error {
	return d.wrapUse(d.use(func(fd int, _ vhost.Dev) error {
		return linux.SetI32(fd, linux.VHOST_VDPA_SET_CONFIG_CALL, int32(callFD))
	}))
}

// Suspend and Resume stop and restart the device's data path; a device
// without them (VDUSE) gives an error wrapping ErrNotSupported.
func (d *VhostDevice) Suspend() error {
	return d.suspendResume(linux.VHOST_VDPA_SUSPEND, linux.VHOST_BACKEND_F_SUSPEND)
}
func (d *VhostDevice) Resume() error {
	return d.suspendResume(linux.VHOST_VDPA_RESUME, linux.VHOST_BACKEND_F_RESUME)
}

func (d *VhostDevice) suspendResume(req linux.Request, bit uint) error {
	err := d.use(func(fd int, _ vhost.Dev) error {
		if d.backendFeatures.Load()&(1<<bit) == 0 {
			return fmt.Errorf("%v: %w (the backend features lack it)", req, ErrNotSupported)
		}
		err := linux.IoctlValue(fd, req, 0)
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("%v: %w", req, ErrNotSupported)
		}
		return err
	})
	return d.wrapUse(err)
}
