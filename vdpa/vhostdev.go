package vdpa

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/vhost"
	"github.com/netctl/netctl/virtio"
)

// ErrNotSupported is wrapped by calls the device does not offer (suspend
// and resume on VDUSE, for example).
var ErrNotSupported = errors.New("not supported by this vDPA device")

// VhostDevice is an open /dev/vhost-vdpa-N: the VMM's side of a vDPA
// device. It owns its fd. Methods are not safe for concurrent use except
// Close.
type VhostDevice struct {
	vhost.Dev
	Path            string
	backendFeatures uint64
	once            sync.Once
}

// OpenVhost opens a vhost-vdpa device. Opening sends the device a reset,
// which a VDUSE device must answer: when nothing answers within ctx's
// deadline, OpenVhost gives up with an error that says so (the kernel's
// own wait, msg_timeout, is 30 s, after which the device is broken for
// good).
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
			return nil, fmt.Errorf("vhost-vdpa: open %s: %w", path, r.err)
		}
		return &VhostDevice{Dev: vhost.Dev{FD: r.fd, Name: "vhost-vdpa " + path}, Path: path}, nil
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

// Close closes the fd (the kernel resets the device). Closing twice is not
// an error.
func (d *VhostDevice) Close() error {
	var err error
	d.once.Do(func() { err = unix.Close(d.FD) })
	return err
}

// DeviceID is VHOST_VDPA_GET_DEVICE_ID (1 for net).
func (d *VhostDevice) DeviceID() (uint32, error) {
	v, err := linux.GetU32(d.FD, linux.VHOST_VDPA_GET_DEVICE_ID)
	return v, d.wrap(err)
}

func (d *VhostDevice) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("vhost-vdpa %s: %w", d.Path, err)
}

// DeviceFeatures returns the device's features.
func (d *VhostDevice) DeviceFeatures() (virtio.Features, error) {
	f, err := d.Features()
	return virtio.Features(f), err
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
		return 0, d.wrap(errors.New("the device lacks IOTLB_MSG_V2, which netctl needs"))
	}
	if err := d.SetBackendFeatures(ack); err != nil {
		return 0, err
	}
	d.backendFeatures = ack
	return ack, nil
}

// Status reads the device status (VHOST_VDPA_GET_STATUS).
func (d *VhostDevice) Status() (uint8, error) {
	var s uint8
	err := linux.Ioctl(d.FD, linux.VHOST_VDPA_GET_STATUS, unsafe.Pointer(&s))
	return s, d.wrap(err)
}

// SetStatus writes the device status; 0 resets the device. Setting
// FEATURES_OK is checked by reading it back (the device may refuse).
func (d *VhostDevice) SetStatus(s uint8) error {
	if err := linux.Ioctl(d.FD, linux.VHOST_VDPA_SET_STATUS, unsafe.Pointer(&s)); err != nil {
		return d.wrap(fmt.Errorf("status %#x: %w", s, err))
	}
	if s&linux.VIRTIO_CONFIG_S_FEATURES_OK != 0 {
		got, err := d.Status()
		if err != nil {
			return err
		}
		if got&linux.VIRTIO_CONFIG_S_FEATURES_OK == 0 {
			return d.wrap(errors.New("the device refused the features (FEATURES_OK did not stick)"))
		}
	}
	return nil
}

// Reset sets status 0.
func (d *VhostDevice) Reset() error { return d.SetStatus(0) }

// Config reads n bytes of config space at off (VHOST_VDPA_GET_CONFIG).
func (d *VhostDevice) Config(off, n uint32) ([]byte, error) {
	buf := make([]byte, 8+n)
	binary.LittleEndian.PutUint32(buf[0:], off)
	binary.LittleEndian.PutUint32(buf[4:], n)
	if err := linux.Ioctl(d.FD, linux.VHOST_VDPA_GET_CONFIG, unsafe.Pointer(&buf[0])); err != nil {
		return nil, d.wrap(err)
	}
	return buf[8:], nil
}

// VQCount is VHOST_VDPA_GET_VQS_COUNT.
func (d *VhostDevice) VQCount() (uint32, error) {
	v, err := linux.GetU32(d.FD, linux.VHOST_VDPA_GET_VQS_COUNT)
	return v, d.wrap(err)
}

// MaxVringNum is VHOST_VDPA_GET_VRING_NUM, the largest ring size.
func (d *VhostDevice) MaxVringNum() (uint16, error) {
	var v uint16
	err := linux.Ioctl(d.FD, linux.VHOST_VDPA_GET_VRING_NUM, unsafe.Pointer(&v))
	return v, d.wrap(err)
}

// IOVARange is VHOST_VDPA_GET_IOVA_RANGE.
func (d *VhostDevice) IOVARange() (first, last uint64, err error) {
	var r linux.VhostVDPAIOVARange
	err = linux.Ioctl(d.FD, linux.VHOST_VDPA_GET_IOVA_RANGE, unsafe.Pointer(&r))
	return r.First, r.Last, d.wrap(err)
}

// EnableVring is VHOST_VDPA_SET_VRING_ENABLE.
func (d *VhostDevice) EnableVring(idx uint32, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	_, err := d.State(linux.VHOST_VDPA_SET_VRING_ENABLE, idx, v)
	return err
}

// SetConfigCall sets the eventfd for config-change interrupts; -1 unbinds.
func (d *VhostDevice) SetConfigCall(fd int) error {
	return d.wrap(linux.SetI32(d.FD, linux.VHOST_VDPA_SET_CONFIG_CALL, int32(fd)))
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
	if d.backendFeatures&(1<<bit) == 0 {
		return d.wrap(fmt.Errorf("%v: %w (the backend features lack it)", req, ErrNotSupported))
	}
	err := linux.IoctlValue(d.FD, req, 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return d.wrap(fmt.Errorf("%v: %w", req, ErrNotSupported))
	}
	return d.wrap(err)
}

// IOTLB messages: Map and Unmap write vhost_msg_v2 to the fd; inside
// Batch they are sent as one batch (one round trip to a VDUSE device).

func (d *VhostDevice) iotlb(typ uint8, iova, size, uaddr uint64, perm uint8) error {
	m := linux.VhostMsgV2{Type: linux.VHOST_IOTLB_MSG_V2,
		IOTLB: linux.VhostIOTLBMsg{IOVA: iova, Size: size, UAddr: uaddr, Perm: perm, Type: typ}}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&m)), unsafe.Sizeof(m))
	n, err := unix.Write(d.FD, b)
	if err != nil {
		return d.wrap(fmt.Errorf("IOTLB message %d [%#x,+%#x): %w", typ, iova, size, err))
	}
	if n != len(b) {
		return d.wrap(fmt.Errorf("IOTLB message: short write %d", n))
	}
	return nil
}

// Map maps [iova, iova+size) to the process memory at uaddr, which must
// be a shared mapping of a file (memfd, shm, hugetlbfs): the kernel
// silently maps nothing for other memory, so Map refuses it.
func (d *VhostDevice) Map(iova, size, uaddr uint64, perm uint8) error {
	if err := checkSharedFileMapping(uaddr, size); err != nil {
		return d.wrap(err)
	}
	return d.iotlb(linux.VHOST_IOTLB_UPDATE, iova, size, uaddr, perm)
}

// SharedMemory is memory known to be a shared mapping of a file because
// the caller made it so (netctl's guest.Memory is a memfd mapped
// MAP_SHARED); MapMemory trusts it and skips Map's /proc/self/maps check.
type SharedMemory interface {
	VA(off int) uint64
	Len() int
	SharedFileMapping() // marker: the memory is MAP_SHARED over a file
}

// MapMemory maps all of m at iova.
func (d *VhostDevice) MapMemory(iova uint64, m SharedMemory, perm uint8) error {
	return d.iotlb(linux.VHOST_IOTLB_UPDATE, iova, uint64(m.Len()), m.VA(0), perm)
}

// Unmap removes the mapping of [iova, iova+size).
func (d *VhostDevice) Unmap(iova, size uint64) error {
	return d.iotlb(linux.VHOST_IOTLB_INVALIDATE, iova, size, 0, 0)
}

// Batch runs f between BATCH_BEGIN and BATCH_END when the device took
// IOTLB_BATCH, so its Maps and Unmaps reach the device as one update.
func (d *VhostDevice) Batch(f func() error) error {
	batch := d.backendFeatures&(1<<linux.VHOST_BACKEND_F_IOTLB_BATCH) != 0
	if batch {
		if err := d.iotlb(linux.VHOST_IOTLB_BATCH_BEGIN, 0, 0, 0, 0); err != nil {
			return err
		}
	}
	err := f()
	if batch {
		if e := d.iotlb(linux.VHOST_IOTLB_BATCH_END, 0, 0, 0, 0); err == nil {
			err = e
		}
	}
	return err
}

// checkSharedFileMapping finds [addr, addr+size) in /proc/self/maps and
// requires every piece to be a shared mapping of a file.
func checkSharedFileMapping(addr, size uint64) error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	end := addr + size
	cur := addr
	s := bufio.NewScanner(f)
	for s.Scan() && cur < end {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, _ := strconv.ParseUint(lo, 16, 64)
		stop, _ := strconv.ParseUint(hi, 16, 64)
		if stop <= cur || start > cur {
			continue
		}
		path := ""
		if len(fields) >= 6 {
			path = fields[5]
		}
		if fields[1][3] != 's' || !strings.HasPrefix(path, "/") {
			return fmt.Errorf("memory at %#x is not a shared mapping of a file (%s %s): vhost-vdpa devices need guest memory "+
				"in a memfd, shm or hugetlbfs file mapped MAP_SHARED", cur, fields[1], path)
		}
		cur = stop
	}
	if cur < end {
		return fmt.Errorf("memory [%#x, %#x) is not mapped", addr, end)
	}
	return nil
}
