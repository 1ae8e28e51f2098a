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
}

// Tap is an open tap device (one queue). Safe for concurrent use.
type Tap struct {
	mu   sync.Mutex // guards fd
	name string
	fd   int
}

// CreateTap creates (or attaches to) a tap with IFF_TAP|IFF_NO_PI and, if
// asked, IFF_VNET_HDR with the given header size. On any failure nothing is
// left open. Equivalent: ip tuntap add mode tap vnet_hdr.
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
	fd, err := unix.Open(TunPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("tap: %s: %w: load the tun module (modprobe tun)", TunPath, err)
		}
		return nil, fmt.Errorf("tap: open %s: %w", TunPath, err)
	}
	t := &Tap{fd: fd}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	var ifr linux.Ifreq
	copy(ifr.Name[:], cfg.Name)
	ifr.Flags = linux.IFF_TAP | linux.IFF_NO_PI
	if cfg.VnetHdr {
		ifr.Flags |= linux.IFF_VNET_HDR
	}
	if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("tap: creating %q needs CAP_NET_ADMIN: run as root: %w", cfg.Name, err)
		}
		return nil, fmt.Errorf("tap: %q: %w", cfg.Name, err)
	}
	t.name = unix.ByteSliceToString(ifr.Name[:])
	if cfg.VnetHdrSize != 0 {
		if err := linux.SetI32(fd, linux.TUNSETVNETHDRSZ, int32(cfg.VnetHdrSize)); err != nil {
			return nil, fmt.Errorf("tap %s: header size %d: %w", t.name, cfg.VnetHdrSize, err)
		}
	}
	ok = true
	return t, nil
}

// Name is the interface name the kernel gave the tap.
func (t *Tap) Name() string { return t.name }

// FD returns the queue's fd, still owned by the Tap.
func (t *Tap) FD() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fd
}

func (t *Tap) get(req linux.Request, f func(fd int) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return fmt.Errorf("tap %s: %v: file already closed", t.name, req)
	}
	if err := f(t.fd); err != nil {
		return fmt.Errorf("tap %s: %w", t.name, err)
	}
	return nil
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

// Close closes the queue; a non-persistent tap goes away with it.
// Closing twice is not an error.
func (t *Tap) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return nil
	}
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}
