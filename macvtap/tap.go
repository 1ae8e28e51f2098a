package macvtap

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// TunPath is the tun/tap clone device (misc 10:200).
const TunPath = "/dev/net/tun"

// TapConfig says what tap to create or open.
type TapConfig struct {
	// Name of the interface, or a template with %d ("vm%d"); empty means
	// the kernel's default "tap%d".
	Name string
	// VnetHdr puts a virtio_net_hdr before every frame (IFF_VNET_HDR);
	// vhost-net needs it unless vhost itself adds the header.
	VnetHdr bool
	// VnetHdrSize is the header size: 10 (legacy), 12 (VERSION_1 or
	// MRG_RXBUF) or 20 (with hash report). Zero keeps the kernel's 10.
	VnetHdrSize int
	// Queues is the number of queues to open (IFF_MULTI_QUEUE when more
	// than one; at most 256). Zero means one.
	Queues int
}

// Tap is an open tap device with one fd per queue. Safe for concurrent use.
type Tap struct {
	mu   sync.Mutex // guards fds
	name string
	fds  []int // nil once closed
}

// CreateTap creates (or attaches to) a tap with IFF_TAP|IFF_NO_PI and, if
// asked, IFF_VNET_HDR with the given header size, opening Queues queues. On
// any failure every fd it opened is closed, so a new tap goes away again.
// Equivalent: ip tuntap add mode tap vnet_hdr [multi_queue].
func CreateTap(cfg TapConfig) (*Tap, error) {
	switch cfg.VnetHdrSize {
	case 0, linux.VIRTIO_NET_HDR_LEN, linux.VIRTIO_NET_HDR_MRG_RXBUF_LEN, linux.VIRTIO_NET_HDR_V1_HASH_LEN:
	default:
		return nil, fmt.Errorf("tap: virtio-net header size %d: use 10 (legacy), 12 (VERSION_1 or MRG_RXBUF) or 20 (hash report)", cfg.VnetHdrSize)
	}
	if cfg.VnetHdrSize != 0 && !cfg.VnetHdr {
		return nil, errors.New("tap: a virtio-net header size needs VnetHdr (IFF_VNET_HDR)")
	}
	if len(cfg.Name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tap: name %q is longer than %d bytes", cfg.Name, unix.IFNAMSIZ-1)
	}
	queues := cfg.Queues
	if queues == 0 {
		queues = 1
	}
	if queues < 0 || queues > linux.MAX_TAP_QUEUES {
		return nil, fmt.Errorf("tap: %d queues: a tap has 1 to %d", cfg.Queues, linux.MAX_TAP_QUEUES)
	}
	flags := uint16(linux.IFF_TAP | linux.IFF_NO_PI)
	if cfg.VnetHdr {
		flags |= linux.IFF_VNET_HDR
	}
	if queues > 1 {
		flags |= linux.IFF_MULTI_QUEUE
	}
	t := &Tap{name: cfg.Name}
	ok := false
	defer func() {
		if !ok {
			for _, fd := range t.fds {
				unix.Close(fd)
			}
		}
	}()
	for q := 0; q < queues; q++ {
		fd, err := unix.Open(TunPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("tap: %s: %w: load the tun module (modprobe tun)", TunPath, err)
			}
			return nil, fmt.Errorf("tap: open %s: %w", TunPath, err)
		}
		t.fds = append(t.fds, fd)
		var ifr linux.Ifreq
		copy(ifr.Name[:], t.name)
		ifr.Flags = flags
		if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
			if errors.Is(err, unix.EPERM) {
				return nil, fmt.Errorf("tap: creating %q needs CAP_NET_ADMIN: run as root: %w", cfg.Name, err)
			}
			return nil, fmt.Errorf("tap: %q queue %d: %w", t.name, q, err)
		}
		t.name = unix.ByteSliceToString(ifr.Name[:]) // queues 1.. attach to the name queue 0 got
	}
	if cfg.VnetHdrSize != 0 {
		for q, fd := range t.fds {
			if err := linux.SetI32(fd, linux.TUNSETVNETHDRSZ, int32(cfg.VnetHdrSize)); err != nil {
				return nil, fmt.Errorf("tap %s queue %d: header size %d: %w", t.name, q, cfg.VnetHdrSize, err)
			}
		}
	}
	ok = true
	return t, nil
}

// Name is the interface name the kernel gave the tap.
func (t *Tap) Name() string { return t.name }

// FD returns queue 0's fd, still owned by the Tap.
func (t *Tap) FD() int { return t.QueueFD(0) }

// QueueFD returns queue q's fd (-1 when closed), still owned by the Tap.
func (t *Tap) QueueFD(q int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q < 0 || q >= len(t.fds) {
		return -1
	}
	return t.fds[q]
}

// Queues is the number of open queues.
func (t *Tap) Queues() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.fds)
}

func (t *Tap) get(req linux.Request, f func(fd int) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.fds) == 0 {
		return fmt.Errorf("tap %s: %v: file already closed", t.name, req)
	}
	if err := f(t.fds[0]); err != nil {
		return fmt.Errorf("tap %s: %w", t.name, err)
	}
	return nil
}

// SetOffload sets what the reader of the tap accepts (TUNSETOFFLOAD, for
// the whole device): TUN_F_* flags, each needing TUN_F_CSUM; USO4 and USO6
// go together and need Linux 6.2.
func (t *Tap) SetOffload(flags uint32) error {
	return t.get(linux.TUNSETOFFLOAD, func(fd int) error {
		return linux.IoctlValue(fd, linux.TUNSETOFFLOAD, uintptr(flags))
	})
}

// VnetHdrSize reads the virtio-net header size back (TUNGETVNETHDRSZ).
func (t *Tap) VnetHdrSize() (int, error) {
	var v uint32
	err := t.get(linux.TUNGETVNETHDRSZ, func(fd int) (err error) {
		v, err = linux.GetU32(fd, linux.TUNGETVNETHDRSZ)
		return err
	})
	return int(int32(v)), err
}

// Flags reads the interface flags back (TUNGETIFF): IFF_TAP, IFF_NO_PI,
// IFF_VNET_HDR, IFF_MULTI_QUEUE, IFF_PERSIST, ...
func (t *Tap) Flags() (uint16, error) {
	var ifr linux.Ifreq
	err := t.get(linux.TUNGETIFF, func(fd int) error {
		return linux.Ioctl(fd, linux.TUNGETIFF, unsafe.Pointer(&ifr))
	})
	return ifr.Flags, err
}

// Close closes every queue; a non-persistent tap goes away with the last.
// Closing twice is not an error.
func (t *Tap) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	for _, fd := range t.fds {
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	t.fds = nil
	return err
}
