package vhostuser

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/vhostnet"
	"github.com/netctl/netctl/virtio"
)

// fakeKernel stands in for /dev/vhost-net: it keeps what each device was
// told, holds a reference (a dup) to every eventfd as the kernel does, and
// refuses to attach a backend to a ring that vhost-net would refuse.
type fakeKernel struct {
	mu    sync.Mutex // guards all below and every fakeVhost
	devs  []*fakeVhost
	calls []string
	fail  map[string]*failure // call name -> the failure to inject
}

// failure makes the call fail once, after skip successful calls.
type failure struct {
	skip int
	err  error
}

type fakeVring struct {
	num     uint32
	base    uint16
	addr    *vhostnet.VringAddr
	kick    int
	call    int
	errfd   int
	backend int
}

type fakeVhost struct {
	k        *fakeKernel
	id       int
	owner    bool
	closed   bool
	features virtio.Features
	table    []vhostnet.MemoryRegion
	logBase  uint64
	logFD    int
	vr       [2]fakeVring
}

const fakeVhostOffers = virtio.NetMrgRxbuf | virtio.NotifyOnEmpty | virtio.LogAll | virtio.AnyLayout |
	virtio.IndirectDesc | virtio.EventIdx | virtio.Version1 | virtio.AccessPlatform | virtio.RingReset

func newFakeKernel() *fakeKernel { return &fakeKernel{fail: map[string]*failure{}} }

func (k *fakeKernel) open() (Vhost, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := &fakeVhost{k: k, id: len(k.devs), logFD: -1}
	d.resetRings()
	k.devs = append(k.devs, d)
	return d, nil
}

func (d *fakeVhost) resetRings() {
	for i := range d.vr {
		for _, fd := range []int{d.vr[i].kick, d.vr[i].call, d.vr[i].errfd} {
			if fd > 0 {
				unix.Close(fd)
			}
		}
		d.vr[i] = fakeVring{kick: -1, call: -1, errfd: -1, backend: -1}
	}
	if d.logFD > 0 {
		unix.Close(d.logFD)
	}
	d.logFD = -1
}

// do records a call and returns the injected failure, if any.
func (d *fakeVhost) do(name string, f func() error) error {
	d.k.mu.Lock()
	defer d.k.mu.Unlock()
	d.k.calls = append(d.k.calls, fmt.Sprintf("%d:%s", d.id, name))
	if f := d.k.fail[name]; f != nil {
		if f.skip == 0 {
			delete(d.k.fail, name)
			return f.err
		}
		f.skip--
	}
	if d.closed {
		return vhostnet.ErrClosed
	}
	if name != "SetOwner" && !d.owner {
		return fmt.Errorf("%s: %w", name, unix.EPERM)
	}
	return f()
}

// ref keeps a duplicate of fd, as the kernel keeps a file reference. Like
// vhost (eventfd_fget, eventfd_ctx_fdget), it refuses an fd that is not an
// eventfd with EINVAL and keeps what it had.
func ref(slot *int, fd int) error {
	if fd >= 0 {
		if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || l != "anon_inode:[eventfd]" {
			return unix.EINVAL
		}
	}
	if *slot > 0 {
		unix.Close(*slot)
	}
	*slot = -1
	if fd < 0 {
		return nil
	}
	n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return err
	}
	*slot = n
	return nil
}

func (d *fakeVhost) SetOwner() error {
	return d.do("SetOwner", func() error {
		if d.owner {
			return unix.EBUSY
		}
		d.owner = true
		return nil
	})
}

func (d *fakeVhost) ResetOwner() error {
	return d.do("ResetOwner", func() error {
		d.owner, d.features, d.table, d.logBase = false, 0, nil, 0
		d.resetRings()
		return nil
	})
}

func (d *fakeVhost) Features() (virtio.Features, error) { return fakeVhostOffers, nil }

func (d *fakeVhost) SetFeatures(f virtio.Features) error {
	return d.do("SetFeatures", func() error {
		if f&^fakeVhostOffers != 0 {
			return unix.EOPNOTSUPP
		}
		d.features = f
		return nil
	})
}

func (d *fakeVhost) SetMemTable(t []vhostnet.MemoryRegion) error {
	return d.do("SetMemTable", func() error { d.table = append([]vhostnet.MemoryRegion(nil), t...); return nil })
}

func (d *fakeVhost) SetLogBase(a uint64) error {
	return d.do("SetLogBase", func() error { d.logBase = a; return nil })
}
func (d *fakeVhost) SetLogFD(fd int) error {
	return d.do("SetLogFD", func() error { return ref(&d.logFD, fd) })
}

func (d *fakeVhost) ring(idx uint32) (*fakeVring, error) {
	if idx > 1 {
		return nil, unix.ENOBUFS
	}
	return &d.vr[idx], nil
}

func (d *fakeVhost) SetVringNum(idx, num uint32) error {
	return d.do(fmt.Sprintf("SetVringNum(%d,%d)", idx, num), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		if r.backend >= 0 {
			return unix.EBUSY
		}
		r.num = num
		return nil
	})
}

func (d *fakeVhost) SetVringBase(idx uint32, base uint16) error {
	return d.do(fmt.Sprintf("SetVringBase(%d,%d)", idx, base), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		if r.backend >= 0 {
			return unix.EBUSY
		}
		r.base = base
		return nil
	})
}

func (d *fakeVhost) VringBase(idx uint32) (uint16, error) {
	var b uint16
	err := d.do(fmt.Sprintf("VringBase(%d)", idx), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		b = r.base
		return nil
	})
	return b, err
}

func (d *fakeVhost) SetVringAddr(idx uint32, a vhostnet.VringAddr) error {
	return d.do(fmt.Sprintf("SetVringAddr(%d)", idx), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		r.addr = &a
		return nil
	})
}

func (d *fakeVhost) file(name string, idx uint32, fd int, slot func(*fakeVring) *int) error {
	return d.do(fmt.Sprintf("%s(%d)", name, idx), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		return ref(slot(r), fd)
	})
}

func (d *fakeVhost) SetVringKick(idx uint32, fd int) error {
	return d.file("SetVringKick", idx, fd, func(r *fakeVring) *int { return &r.kick })
}
func (d *fakeVhost) SetVringCall(idx uint32, fd int) error {
	return d.file("SetVringCall", idx, fd, func(r *fakeVring) *int { return &r.call })
}
func (d *fakeVhost) SetVringErr(idx uint32, fd int) error {
	return d.file("SetVringErr", idx, fd, func(r *fakeVring) *int { return &r.errfd })
}
func (d *fakeVhost) SetBusyLoopTimeout(idx, us uint32) error {
	return d.do(fmt.Sprintf("SetBusyLoopTimeout(%d,%d)", idx, us), func() error { return nil })
}

// SetBackend refuses, as vhost-net does, a ring without size or addresses
// inside the memory table.
func (d *fakeVhost) SetBackend(idx uint32, fd int) error {
	return d.do(fmt.Sprintf("SetBackend(%d,%d)", idx, fd), func() error {
		r, err := d.ring(idx)
		if err != nil {
			return err
		}
		if fd >= 0 {
			if r.num == 0 || r.addr == nil {
				return unix.EFAULT
			}
			desc, avail, used := ringSizes(r.num)
			for _, p := range [][2]uint64{{r.addr.Desc, desc}, {r.addr.Avail, avail}, {r.addr.Used, used}} {
				ok := false
				for _, m := range d.table {
					if p[0] >= m.UserAddr && p[0]+p[1] <= m.UserAddr+m.Size {
						ok = true
					}
				}
				if !ok {
					return fmt.Errorf("ring at %#x not in the memory table: %w", p[0], unix.EFAULT)
				}
			}
		}
		r.backend = fd
		return nil
	})
}

func (d *fakeVhost) Close() error {
	d.k.mu.Lock()
	defer d.k.mu.Unlock()
	if !d.closed {
		d.resetRings()
		d.closed = true
	}
	return nil
}

// snapshot returns a copy of device i's state.
func (k *fakeKernel) dev(i int) fakeVhost {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := *k.devs[i]
	d.table = append([]vhostnet.MemoryRegion(nil), d.table...)
	return d
}

func (k *fakeKernel) callLog() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// failAfter makes the call name fail with err after skip successful ones.
func (k *fakeKernel) failAfter(name string, skip int, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail[name] = &failure{skip: skip, err: err}
}

// fakeTap is a macvtap.Backend whose queues are datagram sockets: what
// the bridge writes to queue q can be read from peers[q] (the fake kernel
// only records the fds).
type fakeTap struct {
	mu       sync.Mutex
	fds      []int
	peers    []int
	hdr      int
	offloads macvtap.Offloads
}

func newFakeTap(queues int) *fakeTap {
	t := &fakeTap{hdr: 10}
	for i := 0; i < queues; i++ {
		p, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		t.fds, t.peers = append(t.fds, p[0]), append(t.peers, p[1])
	}
	return t
}

func (t *fakeTap) Kind() macvtap.Kind { return macvtap.KindTap }
func (t *fakeTap) Name() string       { return "faketap0" }
func (t *fakeTap) Lower() string      { return "" }
func (t *fakeTap) Queues() int        { return len(t.fds) }
func (t *fakeTap) QueueFD(q int) int  { return t.fds[q] }
func (t *fakeTap) VnetHdrSize() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hdr, nil
}
func (t *fakeTap) SetVnetHdrSize(n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hdr = n
	return nil
}
func (t *fakeTap) SetOffloads(o macvtap.Offloads) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.offloads = o
	return nil
}
func (t *fakeTap) Offloads() macvtap.Offloads {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.offloads
}
func (t *fakeTap) Close() error {
	for _, fd := range append(t.fds, t.peers...) {
		unix.Close(fd)
	}
	t.fds, t.peers = nil, nil
	return nil
}
