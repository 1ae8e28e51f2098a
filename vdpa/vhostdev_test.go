package vdpa

import (
	"errors"
	"math"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
)

// TestClosedVhostDeviceTouchesNothing: after Close, a socket takes the
// device's fd number; every method fails with ErrClosed and nothing
// reaches the socket (before, an IOTLB message was written into it).
func TestClosedVhostDeviceTouchesNothing(t *testing.T) {
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := newVhostDevice(fd, "/dev/vhost-vdpa-test")
	d.mode = MapPA // no /proc/self/maps check: the message would go straight to the fd
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	if sp[0] != fd {
		t.Fatalf("the socket got fd %d, not the closed device's %d", sp[0], fd)
	}
	buf := make([]byte, 4096)
	calls := map[string]func() error{
		"Map":   func() error { return d.Map(0, 4096, uint64(uintptr(1<<30)), linux.VHOST_ACCESS_RW) },
		"Unmap": func() error { return d.Unmap(0, 4096) },
		"Batch": func() error {
			d.backendFeatures.Store(1 << linux.VHOST_BACKEND_F_IOTLB_BATCH)
			return d.Batch(func() error { return nil })
		},
		"SetStatus":     func() error { return d.SetStatus(0) },
		"Status":        func() error { _, err := d.Status(); return err },
		"DeviceID":      func() error { _, err := d.DeviceID(); return err },
		"Config":        func() error { _, err := d.Config(0, 6); return err },
		"SetOwner":      d.SetOwner,
		"SetFeatures":   func() error { return d.SetFeatures(1) },
		"SetVringNum":   func() error { return d.SetVringNum(0, 256) },
		"SetVringKick":  func() error { return d.SetVringKick(0, 0) },
		"EnableVring":   func() error { return d.EnableVring(0, true) },
		"SetConfigCall": func() error { return d.SetConfigCall(-1) },
		"Suspend":       d.Suspend,
		"Negotiate":     func() error { _, err := d.NegotiateBackend(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if n, err := unix.Read(sp[1], buf); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("the socket that reuses the fd number received %d bytes (%v)", n, err)
	}
}

func TestMapRangesRefused(t *testing.T) {
	d := newVhostDevice(-1, "/dev/vhost-vdpa-test") // nothing may reach an fd
	d.fd = 1 << 30                                  // not open: a call that passed validation would fail with EBADF
	defer func() { d.fd = -1 }()
	for _, tc := range []struct {
		name              string
		iova, size, uaddr uint64
		perm              uint8
		want              string
	}{
		{"size 0", 0, 0, 1 << 30, linux.VHOST_ACCESS_RW, "size 0"},
		{"IOVA wraps", math.MaxUint64 - 4095, 8192, 1 << 30, linux.VHOST_ACCESS_RW, "IOVA range"},
		{"uaddr wraps", 0, 8192, math.MaxUint64 - 4095, linux.VHOST_ACCESS_RW, "process memory range"},
		{"bad perm", 0, 4096, 1 << 30, 0, "permission 0"},
		{"bad perm 4", 0, 4096, 1 << 30, 4, "permission 4"},
	} {
		err := d.Map(tc.iova, tc.size, tc.uaddr, tc.perm)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Map: %v, want ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
	// The last byte may be 2^64-1.
	if err := checkRange("IOVA", math.MaxUint64-4095, 4096); err != nil {
		t.Errorf("range ending at 2^64: %v", err)
	}
	if err := checkRange("IOVA", 0, math.MaxUint64); err != nil {
		t.Errorf("range [0, 2^64-1): %v", err)
	}
	for _, err := range []error{d.Unmap(0, 0), d.Unmap(math.MaxUint64, 2)} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Unmap: %v, want ErrInvalid", err)
		}
	}
	// Config: a length that would wrap 8+n in uint32 or pass the config
	// space is refused before any allocation or ioctl.
	for _, r := range [][2]uint32{{0, math.MaxUint32 - 7}, {0, math.MaxUint32}, {0, 0}, {4090, 7}, {math.MaxUint32, 2}} {
		if _, err := d.Config(r[0], r[1]); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "config space") {
			t.Errorf("Config(%d, %d): %v, want ErrInvalid naming the config space", r[0], r[1], err)
		}
	}
}

func TestMapModeOf(t *testing.T) {
	for _, tc := range []struct {
		subsystem, parent string
		simUseVA          bool
		want              MapMode
	}{
		{"vduse", "vdpatest0", false, MapVA},  // VDUSE: vhost-vdpa's use_va
		{"pci", "0000:65:00.2", false, MapPA}, // ifcvf, octeon_ep, mlx5 PF: pins pages
		{"auxiliary", "mlx5_core.sf.2", false, MapPA},
		{"", "vdpasim_net", true, MapVA},  // vdpa_sim use_va=1 (its default)
		{"", "vdpasim_net", false, MapPA}, // vdpa_sim use_va=0
		{"", "something", false, MapUnknown},
	} {
		if got := mapModeOf(tc.subsystem, tc.parent, tc.simUseVA); got != tc.want {
			t.Errorf("mapModeOf(%q, %q, %v) = %v, want %v", tc.subsystem, tc.parent, tc.simUseVA, got, tc.want)
		}
	}
}

// TestMapModeDecidesTheCheck: private anonymous memory is refused for a
// VA parent (and an unknown one) and reaches the device for a PA parent.
func TestMapModeDecidesTheCheck(t *testing.T) {
	private, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(private)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[1])
	d := newVhostDevice(sp[0], "/dev/vhost-vdpa-test") // stands in for the device: the message arrives on sp[1]
	defer d.Close()
	va := linux.MappedAddr(private, 0)
	for _, mode := range []MapMode{MapVA, MapUnknown} {
		d.mode = mode
		if err := d.Map(0, 1<<16, va, linux.VHOST_ACCESS_RW); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), "not a shared mapping of a file") {
			t.Errorf("%v parent, private anonymous memory: %v", mode, err)
		}
	}
	d.mode = MapPA
	if err := d.Map(0, 1<<16, va, linux.VHOST_ACCESS_RW); err != nil {
		t.Errorf("PA parent, private anonymous memory: %v", err)
	}
	buf := make([]byte, 256)
	n, err := unix.Read(sp[1], buf)
	if err != nil || n != 72 {
		t.Fatalf("the device got %d bytes, %v; want one 72-byte vhost_msg_v2", n, err)
	}
}
