package vhostnet

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/virtio"
)

func TestEventFDZeroValueIsNone(t *testing.T) {
	var r Vring
	for name, e := range map[string]EventFD{"kick": r.Kick, "call": r.Call, "err": r.Err, "NoEventFD": NoEventFD, "EventFDOf(-1)": EventFDOf(-1)} {
		if fd, ok := e.FD(); ok || fd != -1 || e.raw() != -1 {
			t.Errorf("%s: FD() = %d, %v; raw %d: want none (-1)", name, fd, ok, e.raw())
		}
	}
	if fd, ok := EventFDOf(0).FD(); !ok || fd != 0 || EventFDOf(0).raw() != 0 {
		t.Errorf("EventFDOf(0) = %d, %v; want fd 0, set", fd, ok)
	}
	if s := EventFDOf(7).String() + " " + NoEventFD.String(); s != "fd 7 none" {
		t.Errorf("String: %q", s)
	}
}

type fakeRing struct{ kick, call int }

func (r fakeRing) Num() uint16                       { return 256 }
func (r fakeRing) Addrs() (desc, avail, used uint64) { return 0x1000, 0x2000, 0x3000 }
func (r fakeRing) KickFD() int                       { return r.kick }
func (r fakeRing) CallFD() int                       { return r.call }

func TestVringOf(t *testing.T) {
	v := VringOf(fakeRing{kick: 5, call: -1})
	if k, _ := v.Kick.FD(); k != 5 {
		t.Errorf("kick %v, want fd 5", v.Kick)
	}
	if _, ok := v.Call.FD(); ok {
		t.Errorf("call %v, want none", v.Call)
	}
	if _, ok := v.Err.FD(); ok {
		t.Errorf("err %v, want none", v.Err)
	}
	if v.Num != 256 || v.Addr.Desc != 0x1000 || v.Addr.Avail != 0x2000 || v.Addr.Used != 0x3000 {
		t.Errorf("%+v", v)
	}
}

func TestNICDeviceClosedOrOutOfRange(t *testing.T) {
	n := &NIC{devs: []*Device{{fd: -1, backends: [2]int{-1, -1}}}}
	if d, err := n.Device(0); err != nil || d == nil {
		t.Errorf("Device(0): %v, %v", d, err)
	}
	for _, qp := range []int{-1, 1, 1 << 30} {
		if d, err := n.Device(qp); !errors.Is(err, ErrInvalid) || d != nil || !strings.Contains(err.Error(), "0 to 0") {
			t.Errorf("Device(%d): %v, %v; want ErrInvalid naming 0 to 0", qp, d, err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := n.Device(0); !errors.Is(err, ErrClosed) || d != nil {
		t.Errorf("Device(0) after Close: %v, %v; want ErrClosed", d, err)
	}
	if err := n.Start(); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestZeroNIC(t *testing.T) {
	var n NIC
	if err := n.Start(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Start of a zero NIC: %v, want ErrInvalid", err)
	}
	if _, err := n.Device(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Device(0) of a zero NIC: %v, want ErrInvalid", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("Close of a zero NIC: %v", err)
	}
}

func TestNICConfigCloneSharesNothing(t *testing.T) {
	cfg := NICConfig{Memory: []MemoryRegion{{0, 4096, 0x10000}}, Queues: []QueuePair{{Backend: 7}}}
	c := cfg.clone()
	cfg.Memory[0].Size = 0
	cfg.Queues[0].Backend = -1
	if c.Memory[0].Size != 4096 || c.Queues[0].Backend != 7 {
		t.Errorf("the copy changed with the caller's slices: %+v", c)
	}
}

// TestNICConfigValidate: what NewNIC refuses before it opens anything.
func TestNICConfigValidate(t *testing.T) {
	a, b, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(a)
	defer unix.Close(b)
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ring := Vring{Num: 256}
	mem := []MemoryRegion{{0, 1 << 20, 0x10000}}
	for _, c := range []struct {
		name string
		cfg  NICConfig
		want string
	}{
		{"no queues", NICConfig{Memory: mem}, "at least one queue pair"},
		{"no memory", NICConfig{Queues: []QueuePair{{RX: ring, TX: ring, Backend: a}}}, "at least one region"},
		{"log all", NICConfig{Features: virtio.LogAll, Memory: mem, Queues: []QueuePair{{RX: ring, TX: ring, Backend: a}}}, "log base"},
		{"overlap", NICConfig{Memory: append(mem, mem[0]), Queues: []QueuePair{{RX: ring, TX: ring, Backend: a}}}, "overlap"},
		{"ring size", NICConfig{Memory: mem, Queues: []QueuePair{{RX: ring, TX: Vring{Num: 3}, Backend: a}}}, "vq 1: ring size 3"},
		{"ring zero", NICConfig{Memory: mem, Queues: []QueuePair{{RX: Vring{}, TX: ring, Backend: a}}}, "vq 0: ring size 0"},
		{"misaligned", NICConfig{Memory: mem, Queues: []QueuePair{{RX: Vring{Num: 8, Addr: VringAddr{Used: 2}}, TX: ring, Backend: a}}}, "misaligned"},
		{"unix socket", NICConfig{Memory: mem, Queues: []QueuePair{{RX: ring, TX: ring, Backend: a}}}, "AF_PACKET SOCK_RAW"},
		{"file", NICConfig{Memory: mem, Queues: []QueuePair{{RX: ring, TX: ring, Backend: int(f.Fd())}}}, "neither a tap"},
		{"closed fd", NICConfig{Memory: mem, Queues: []QueuePair{{RX: ring, TX: ring, Backend: 1 << 20}}}, "not open"},
	} {
		if err := c.cfg.validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
		if n, err := NewNIC(c.cfg); n != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("NewNIC %s: %v, %v; want ErrInvalid", c.name, n, err)
		}
	}
}

func socketpair() (int, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	return fds[0], fds[1], err
}
