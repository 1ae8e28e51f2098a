package vduse

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// The device side of the data path: once the driver sets DRIVER_OK, the
// device maps the driver's memory through VDUSE_IOTLB_GET_FD, takes each
// frame the driver puts on the TX queue (vq 1) and hands it back on the RX
// queue (vq 0): a loopback NIC.

type mapping struct {
	start, last uint64
	mem         []byte
}

type vq struct {
	num                  uint32
	desc, driver, device uint64 // IOVAs
	kick                 int    // eventfd the kernel signals on a kick
	lastAvail, usedIdx   uint16
}

type datapath struct {
	maps    []mapping
	vqs     [2]vq
	hdrLen  int
	mrg     bool
	Looped  atomic.Uint64 // frames looped back
	Dropped atomic.Uint64 // frames with no RX buffer to take them
}

// maxMap bounds one IOTLB map the device mmaps (the driver decides the
// map sizes; netctl's tests map at most a few GiB).
const maxMap = 1 << 36

// translate returns the bytes at [iova, iova+n), mapping them on first
// use. The addresses come from the driver: a range that wraps, or that
// does not lie within one IOTLB map, is an error.
func (d *Device) translate(iova uint64, n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n < 0 || uint64(n)-1 > math.MaxUint64-iova {
		return nil, fmt.Errorf("buffer [%#x,+%d) wraps past 2^64", iova, n)
	}
	last := iova + uint64(n) - 1
	for _, m := range d.dp.maps {
		if iova >= m.start && last <= m.last {
			off := iova - m.start
			return m.mem[off : off+uint64(n)], nil
		}
	}
	e := linux.VduseIOTLBEntry{Start: iova, Last: last}
	fd, err := linux.IoctlPtrRet(d.fd, linux.VDUSE_IOTLB_GET_FD, unsafe.Pointer(&e))
	if err != nil {
		return nil, fmt.Errorf("IOTLB_GET_FD [%#x,+%d): %w", iova, n, err)
	}
	defer unix.Close(fd)
	if e.Start > iova || e.Last < last || e.Last-e.Start >= maxMap {
		return nil, fmt.Errorf("buffer [%#x,+%d) is not within one IOTLB map of at most %d bytes (the kernel's is [%#x, %#x])",
			iova, n, uint64(maxMap), e.Start, e.Last)
	}
	mem, err := unix.Mmap(fd, int64(e.Offset), int(e.Last-e.Start+1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap IOTLB fd: %w", err)
	}
	d.dp.maps = append(d.dp.maps, mapping{e.Start, e.Last, mem})
	off := iova - e.Start
	return mem[off : off+uint64(n)], nil
}

// dropMaps forgets every mapping (the IOTLB changed).
func (d *Device) dropMaps() {
	for _, m := range d.dp.maps {
		unix.Munmap(m.mem)
	}
	d.dp.maps = nil
}

// startDataPath reads the rings' addresses and installs kick eventfds.
func (d *Device) startDataPath() error {
	feats, err := linux.GetU64(d.fd, linux.VDUSE_DEV_GET_FEATURES)
	if err != nil {
		return err
	}
	d.dp.mrg = feats&(1<<linux.VIRTIO_NET_F_MRG_RXBUF) != 0
	d.dp.hdrLen = 10
	if feats&(1<<linux.VIRTIO_F_VERSION_1) != 0 || d.dp.mrg {
		d.dp.hdrLen = 12
	}
	for i := range d.dp.vqs {
		info := linux.VduseVQInfo{Index: uint32(i)}
		if err := linux.Ioctl(d.fd, linux.VDUSE_VQ_GET_INFO, unsafe.Pointer(&info)); err != nil {
			return err
		}
		q := &d.dp.vqs[i]
		if q.kick <= 0 {
			if q.kick, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
				return err
			}
		}
		if info.Num == 0 || info.Num > 32768 {
			return fmt.Errorf("vq %d: ring size %d, want 1..32768", i, info.Num)
		}
		q.num, q.desc, q.driver, q.device = info.Num, info.DescAddr, info.DriverAddr, info.DeviceAddr
		q.lastAvail = binary.NativeEndian.Uint16(info.State[:2]) // vduse_vq_state_split.avail_index: a host-order __u16
		q.usedIdx = q.lastAvail
		ev := linux.VduseVQEventfd{Index: uint32(i), FD: int32(q.kick)}
		if err := linux.Ioctl(d.fd, linux.VDUSE_VQ_SETUP_KICKFD, unsafe.Pointer(&ev)); err != nil {
			return err
		}
	}
	return nil
}

func (d *Device) stopDataPath() {
	for i := range d.dp.vqs {
		if q := &d.dp.vqs[i]; q.kick > 0 {
			ev := linux.VduseVQEventfd{Index: uint32(i), FD: -1}
			linux.Ioctl(d.fd, linux.VDUSE_VQ_SETUP_KICKFD, unsafe.Pointer(&ev))
			unix.Close(q.kick)
			q.kick = 0
		}
	}
	d.dropMaps()
}

// chain walks a descriptor chain from head and returns its buffers.
func (d *Device) chain(q *vq, head uint16) ([][]byte, []bool, error) {
	var bufs [][]byte
	var writable []bool
	idx := head
	for n := 0; n < int(q.num); n++ {
		if uint32(idx) >= q.num {
			return nil, nil, fmt.Errorf("descriptor %d of a %d-entry ring", idx, q.num)
		}
		dd, err := d.translate(q.desc+16*uint64(idx), 16)
		if err != nil {
			return nil, nil, err
		}
		addr, ln := binary.LittleEndian.Uint64(dd), binary.LittleEndian.Uint32(dd[8:])
		flags, next := binary.LittleEndian.Uint16(dd[12:]), binary.LittleEndian.Uint16(dd[14:])
		b, err := d.translate(addr, int(ln))
		if err != nil {
			return nil, nil, err
		}
		bufs = append(bufs, b)
		writable = append(writable, flags&linux.VRING_DESC_F_WRITE != 0)
		if flags&linux.VRING_DESC_F_NEXT == 0 {
			return bufs, writable, nil
		}
		idx = next
	}
	return nil, nil, fmt.Errorf("descriptor loop")
}

// nextAvail returns the next available head of q, if any.
func (d *Device) nextAvail(q *vq) (uint16, bool, error) {
	avail, err := d.translate(q.driver, 4+2*int(q.num))
	if err != nil {
		return 0, false, err
	}
	idx := uint16(atomic.LoadUint32((*uint32)(unsafe.Pointer(&avail[0]))) >> 16)
	if idx == q.lastAvail {
		return 0, false, nil
	}
	head := binary.LittleEndian.Uint16(avail[4+2*int(q.lastAvail%uint16(q.num)):])
	q.lastAvail++
	return head, true, nil
}

// putUsed publishes a used entry and interrupts the driver.
func (d *Device) putUsed(i int, head uint16, n uint32) error {
	q := &d.dp.vqs[i]
	used, err := d.translate(q.device, 4+8*int(q.num))
	if err != nil {
		return err
	}
	e := used[4+8*int(q.usedIdx%uint16(q.num)):]
	binary.LittleEndian.PutUint32(e, uint32(head))
	binary.LittleEndian.PutUint32(e[4:], n)
	q.usedIdx++
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&used[0])), uint32(q.usedIdx)<<16)
	idx := uint32(i)
	return linux.Ioctl(d.fd, linux.VDUSE_VQ_INJECT_IRQ, unsafe.Pointer(&idx))
}

// loop moves every frame waiting on TX to RX.
func (d *Device) loop() error {
	tx, rx := &d.dp.vqs[1], &d.dp.vqs[0]
	for {
		head, ok, err := d.nextAvail(tx)
		if err != nil || !ok {
			return err
		}
		bufs, _, err := d.chain(tx, head)
		if err != nil {
			return err
		}
		var frame []byte
		for _, b := range bufs {
			frame = append(frame, b...)
		}
		if err := d.putUsed(1, head, 0); err != nil {
			return err
		}
		rhead, ok, err := d.nextAvail(rx)
		if err != nil {
			return err
		}
		if !ok {
			d.dp.Dropped.Add(1)
			continue
		}
		rbufs, _, err := d.chain(rx, rhead)
		if err != nil {
			return err
		}
		if d.dp.mrg && len(frame) >= 12 {
			binary.LittleEndian.PutUint16(frame[10:], 1) // num_buffers
		}
		written := 0
		for _, b := range rbufs {
			written += copy(b, frame[written:])
		}
		d.dp.Looped.Add(1) // counted before the driver can see the frame
		if err := d.putUsed(0, rhead, uint32(written)); err != nil {
			return err
		}
	}
}

// Looped counts the frames the device looped from TX back to RX.
func (d *Device) Looped() uint64 { return d.dp.Looped.Load() }
