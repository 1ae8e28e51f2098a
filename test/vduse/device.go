package vduse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/virtio"
)

// Config describes a VDUSE virtio-net device.
type Config struct {
	Name     string          // also the vdpa device name for "vdpa dev add"
	Features virtio.Features // default: VERSION_1|ACCESS_PLATFORM|MAC|STATUS|MTU|MRG_RXBUF|EVENT_IDX
	MAC      net.HardwareAddr
	MTU      uint16 // default 1500
	VQSize   uint16 // default 256
	// Silent makes the device never answer control messages, to test
	// what a hung device does to its users.
	Silent bool
}

// DefaultFeatures are the features of a test device: what VDUSE takes for
// net (VERSION_1 and ACCESS_PLATFORM required, no CTRL_VQ).
const DefaultFeatures = virtio.Version1 | virtio.AccessPlatform | virtio.NetMAC | virtio.NetStatus | virtio.NetMTU |
	virtio.NetMrgRxbuf | virtio.EventIdx

// Device is a VDUSE virtio-net device served by this process: it answers
// every control message (SET_STATUS, GET_VQ_STATE, UPDATE_IOTLB) from its
// own goroutine. Close stops serving and destroys the device.
type Device struct {
	Name     string
	ctl, fd  int
	stop     chan struct{}
	done     chan struct{}
	status   atomic.Uint32 // last status the driver set
	requests atomic.Uint64
	silent   atomic.Bool
	refuse   atomic.Uint32 // status bits whose SET_STATUS is answered FAILED (review test knob)
	once     sync.Once
	dp       datapath
	running  bool // DRIVER_OK seen: the data path runs
}

// Create makes the device (VDUSE_CREATE_DEV), sets up its two virtqueues
// and starts answering. It needs the vduse module and CAP_NET_ADMIN. On
// failure nothing is left.
func Create(cfg Config) (*Device, error) {
	if cfg.Features == 0 {
		cfg.Features = DefaultFeatures
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.VQSize == 0 {
		cfg.VQSize = 256
	}
	if cfg.MAC == nil {
		cfg.MAC = net.HardwareAddr{0x02, 0, 0, 0, 0x0d, 0x01}
	}
	ctl, err := unix.Open(ControlPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("vduse: open %s: %w (load the vduse module)", ControlPath, err)
	}
	d := &Device{Name: cfg.Name, ctl: ctl, fd: -1, stop: make(chan struct{}), done: make(chan struct{})}
	d.silent.Store(cfg.Silent)
	api := uint64(linux.VDUSE_API_VERSION)
	if err := linux.Ioctl(ctl, linux.VDUSE_SET_API_VERSION, unsafe.Pointer(&api)); err != nil {
		unix.Close(ctl)
		return nil, fmt.Errorf("vduse: %w", err)
	}
	// struct vduse_dev_config followed by a 24-byte virtio_net_config.
	netcfg := make([]byte, 24)
	copy(netcfg[0:6], cfg.MAC)
	binary.LittleEndian.PutUint16(netcfg[6:], linux.VIRTIO_NET_S_LINK_UP)
	binary.LittleEndian.PutUint16(netcfg[8:], 1)
	binary.LittleEndian.PutUint16(netcfg[10:], cfg.MTU)
	var dc linux.VduseDevConfig
	copy(dc.Name[:], cfg.Name)
	dc.DeviceID = linux.VIRTIO_ID_NET
	dc.Features = uint64(cfg.Features)
	dc.VQNum = 2
	dc.VQAlign = 4096
	dc.ConfigSize = uint32(len(netcfg))
	buf := make([]byte, unsafe.Sizeof(dc)+uintptr(len(netcfg)))
	copy(buf, unsafe.Slice((*byte)(unsafe.Pointer(&dc)), unsafe.Sizeof(dc)))
	copy(buf[unsafe.Sizeof(dc):], netcfg)
	if err := linux.Ioctl(ctl, linux.VDUSE_CREATE_DEV, unsafe.Pointer(&buf[0])); err != nil {
		unix.Close(ctl)
		return nil, fmt.Errorf("vduse: create %s: %w", cfg.Name, err)
	}
	ok := false
	defer func() {
		if !ok {
			d.destroy()
		}
	}()
	path := "/dev/vduse/" + cfg.Name
	if d.fd, err = unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
		return nil, fmt.Errorf("vduse: open %s: %w", path, err)
	}
	for i := uint32(0); i < 2; i++ {
		vc := linux.VduseVQConfig{Index: i, MaxSize: cfg.VQSize}
		if err := linux.Ioctl(d.fd, linux.VDUSE_VQ_SETUP, unsafe.Pointer(&vc)); err != nil {
			return nil, fmt.Errorf("vduse: %s vq %d setup: %w", cfg.Name, i, err)
		}
	}
	go d.serve()
	ok = true
	return d, nil
}

// Status is the last device status the driver set.
func (d *Device) Status() uint8 { return uint8(d.status.Load()) }

// Requests counts the control messages answered.
func (d *Device) Requests() uint64 { return d.requests.Load() }

// RefuseStatus makes the device answer FAILED to a SET_STATUS that sets
// any of bits (the kernel then keeps the old status).
func (d *Device) RefuseStatus(bits uint8) { d.refuse.Store(uint32(bits)) }

// SetSilent stops (or resumes) answering control messages.
func (d *Device) SetSilent(s bool) { d.silent.Store(s) }

func (d *Device) serve() {
	defer close(d.done)
	defer d.stopDataPath()
	req := make([]byte, linux.VDUSE_MSG_SIZE)
	resp := make([]byte, linux.VDUSE_MSG_SIZE)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		if d.silent.Load() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
		if d.running {
			for i := range d.dp.vqs {
				pfd = append(pfd, unix.PollFd{Fd: int32(d.dp.vqs[i].kick), Events: unix.POLLIN})
			}
		}
		if n, err := unix.Poll(pfd, 50); err != nil || n == 0 {
			continue
		}
		if pfd[0].Revents&unix.POLLERR != 0 {
			return // the kernel marked the device broken
		}
		if d.running {
			for _, p := range pfd[1:] {
				if p.Revents&unix.POLLIN != 0 {
					var b [8]byte
					unix.Read(int(p.Fd), b[:])
				}
			}
			d.loop()
		}
		if pfd[0].Revents&unix.POLLIN == 0 || d.silent.Load() {
			continue // no control message, or leave it unread
		}
		if _, err := unix.Read(d.fd, req); err != nil {
			continue
		}
		typ := binary.NativeEndian.Uint32(req[0:])
		id := binary.NativeEndian.Uint32(req[4:])
		clear(resp)
		binary.NativeEndian.PutUint32(resp[0:], id)
		binary.NativeEndian.PutUint32(resp[4:], linux.VDUSE_REQ_RESULT_OK)
		switch typ {
		case linux.VDUSE_SET_STATUS:
			st := req[24]
			if r := uint8(d.refuse.Load()); r != 0 && st&r != 0 {
				binary.NativeEndian.PutUint32(resp[4:], linux.VDUSE_REQ_RESULT_FAILED)
				break
			}
			d.status.Store(uint32(st))
			switch {
			case st&linux.VIRTIO_CONFIG_S_DRIVER_OK != 0 && !d.running:
				// The reply must go out first: DRIVER_OK is only set
				// once it is answered.
				unix.Write(d.fd, resp)
				d.requests.Add(1)
				if err := d.startDataPath(); err == nil {
					d.running = true
				}
				continue
			case st == 0 && d.running:
				d.running = false
				d.stopDataPath()
			}
		case linux.VDUSE_GET_VQ_STATE:
			idx := binary.NativeEndian.Uint32(req[24:])
			binary.NativeEndian.PutUint32(resp[24:], idx)
			if idx < 2 && d.running {
				binary.NativeEndian.PutUint16(resp[28:], d.dp.vqs[idx].lastAvail)
			} else {
				info := linux.VduseVQInfo{Index: idx}
				if linux.Ioctl(d.fd, linux.VDUSE_VQ_GET_INFO, unsafe.Pointer(&info)) == nil {
					copy(resp[28:30], info.State[:2]) // split.avail_index
				}
			}
		case linux.VDUSE_UPDATE_IOTLB:
			d.dropMaps() // mapped again on next use
		}
		unix.Write(d.fd, resp)
		d.requests.Add(1)
	}
}

// InjectConfigIRQ raises a config-change interrupt
// (VDUSE_DEV_INJECT_CONFIG_IRQ; the driver must have set DRIVER_OK).
func (d *Device) InjectConfigIRQ() error {
	return linux.IoctlValue(d.fd, linux.VDUSE_DEV_INJECT_CONFIG_IRQ, 0)
}

// Close stops answering, closes the device and destroys it
// (VDUSE_DESTROY_DEV). Delete the vdpa device first, or destroying fails
// with EBUSY. Closing twice is not an error.
func (d *Device) Close() error {
	var err error
	d.once.Do(func() {
		close(d.stop)
		<-d.done
		err = d.destroy()
	})
	return err
}

func (d *Device) destroy() error {
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
	var name [linux.VDUSE_NAME_MAX]byte
	copy(name[:], d.Name)
	var err error
	for i := 0; i < 50; i++ {
		if err = linux.Ioctl(d.ctl, linux.VDUSE_DESTROY_DEV, unsafe.Pointer(&name[0])); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	unix.Close(d.ctl)
	if err != nil {
		return fmt.Errorf("vduse: destroy %s: %w (delete the vdpa device first)", d.Name, err)
	}
	if _, serr := os.Stat("/dev/vduse/" + d.Name); serr == nil {
		return fmt.Errorf("vduse: /dev/vduse/%s still exists after destroy", d.Name)
	}
	return nil
}
