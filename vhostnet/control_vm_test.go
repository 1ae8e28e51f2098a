package vhostnet

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
	"github.com/netctl/netctl/virtio"
)

// ringMem maps zeroed memory for one split ring of 256 entries: descriptors
// at 0, avail at 4 KiB, used at 8 KiB.
func ringMem(t *testing.T) (mem []byte, addr VringAddr) {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	base := linux.MappedAddr(mem, 0)
	return mem, VringAddr{Desc: base, Avail: base + 4096, Used: base + 8192}
}

// TestVMControlPlane drives every control ioctl of one vhost-net device
// against the VM's kernel, with a tap backend in a throwaway namespace.
func TestVMControlPlane(t *testing.T) {
	k := testenv.VM(t)
	testenv.Host(t)
	fds := testenv.OpenFDs(t)

	d, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	// Fork-from-owner control: Debian's 6.12.117 has the backport, 6.1
	// does not, and there it must be ErrNotSupported both before SetOwner
	// (the generic code answers EPERM) and after (ENOTTY).
	hasFork, known := map[string]bool{"6.12": true, "6.1": false}[k.Name]
	if !known {
		t.Fatalf("kernel %s: no expectation recorded for fork-from-owner control", k.Name)
	}
	err = d.SetForkFromOwner(false)
	if hasFork {
		if err != nil {
			t.Errorf("kernel %s: SetForkFromOwner(false): %v", k.Name, err)
		} else if task, err := d.ForkFromOwner(); err != nil || task {
			t.Errorf("ForkFromOwner after setting kthread mode: %v, %v", task, err)
		}
	} else {
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_VHOST_ENABLE_FORK_OWNER_CONTROL") {
			t.Errorf("kernel %s: SetForkFromOwner: %v, want ErrNotSupported naming the config option", k.Name, err)
		}
		if _, err := d.ForkFromOwner(); !errors.Is(err, ErrNotSupported) {
			t.Errorf("kernel %s: ForkFromOwner: %v, want ErrNotSupported", k.Name, err)
		}
	}
	if err := d.SetOwner(); err != nil {
		t.Fatal(err)
	}
	err = d.SetForkFromOwner(true)
	if hasFork {
		if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "before SetOwner") {
			t.Errorf("SetForkFromOwner after SetOwner: %v, want EBUSY with a hint", err)
		}
	} else if !errors.Is(err, ErrNotSupported) {
		t.Errorf("kernel %s: SetForkFromOwner after SetOwner: %v, want ErrNotSupported", k.Name, err)
	}

	// Features: an offload bit vhost-net does not offer is refused by name.
	err = d.SetFeatures(virtio.Version1 | virtio.NetHostTSO4)
	if err == nil || !strings.Contains(err.Error(), "HOST_TSO4") {
		t.Errorf("SetFeatures(HOST_TSO4): %v, want an error naming HOST_TSO4", err)
	}
	if err := d.SetFeatures(virtio.Version1 | virtio.EventIdx | virtio.IndirectDesc | virtio.NetMrgRxbuf); err != nil {
		t.Fatal(err)
	}
	if bf, err := d.BackendFeatures(); err != nil || bf != 1<<1 {
		t.Errorf("backend features %#x, %v; want IOTLB_MSG_V2 (0x2)", bf, err)
	}

	// Memory table: within and past the module's limit.
	max, err := MaxMemRegions()
	if err != nil || max != 64 {
		t.Errorf("max_mem_regions %d, %v; want the default 64", max, err)
	}
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	ua := linux.MappedAddr(buf, 0)
	if err := d.SetMemTable([]MemoryRegion{{GuestPhysAddr: 0, Size: 1 << 19, UserAddr: ua}, {GuestPhysAddr: 1 << 30, Size: 1 << 19, UserAddr: ua + 1<<19}}); err != nil {
		t.Fatal(err)
	}
	many := make([]MemoryRegion, max+1)
	for i := range many {
		many[i] = MemoryRegion{GuestPhysAddr: uint64(i) << 12, Size: 4096, UserAddr: ua + uint64(i%256)<<12}
	}
	if err := d.SetMemTable(many); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "max_mem_regions=65") {
		t.Errorf("%d regions: %v, want an error saying how to raise the limit", len(many), err)
	}

	// Rings.
	if err := d.SetVringNum(RX, 3); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Errorf("ring size 3: %v", err)
	}
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "vhtest%d", VnetHdr: true, VnetHdrSize: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if err := d.SetBackend(RX, tap.FD()); err == nil || !errors.Is(err, unix.EFAULT) {
		t.Errorf("backend before ring setup: %v, want EFAULT with a hint", err)
	}
	kick, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	call, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	defer unix.Close(kick)
	defer unix.Close(call)
	for _, vq := range []uint32{RX, TX} {
		_, addr := ringMem(t)
		if err := d.SetVringNum(vq, 256); err != nil {
			t.Fatal(err)
		}
		if err := d.SetVringBase(vq, 5); err != nil {
			t.Fatal(err)
		}
		if err := d.SetVringAddr(vq, addr); err != nil {
			t.Fatal(err)
		}
		if err := d.SetVringKick(vq, kick); err != nil {
			t.Fatal(err)
		}
		if err := d.SetVringCall(vq, call); err != nil {
			t.Fatal(err)
		}
		if err := d.SetVringErr(vq, -1); err != nil {
			t.Fatal(err)
		}
		if err := d.SetBusyLoopTimeout(vq, 50); err != nil {
			t.Fatal(err)
		}
		if us, err := d.BusyLoopTimeout(vq); err != nil || us != 50 {
			t.Errorf("vq %d busy-loop timeout %d, %v; want 50", vq, us, err)
		}
	}
	if err := d.SetVringAddr(TX, VringAddr{Avail: 1}); err == nil || !strings.Contains(err.Error(), "misaligned") {
		t.Errorf("odd avail address: %v", err)
	}
	f, err := unix.Open("/proc/self/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetBackend(TX, f); !errors.Is(err, unix.ENOTSOCK) || !strings.Contains(err.Error(), "not a tap") {
		t.Errorf("file as backend: %v", err)
	}
	unix.Close(f)
	for _, vq := range []uint32{RX, TX} {
		if err := d.SetBackend(vq, tap.FD()); err != nil {
			t.Fatalf("attach tap to vq %d: %v", vq, err)
		}
	}
	if err := d.SetVringNum(RX, 128); !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "detach the backend") {
		t.Errorf("resize with a backend attached: %v, want EBUSY with a hint", err)
	}
	for _, vq := range []uint32{RX, TX} {
		if err := d.DetachBackend(vq); err != nil {
			t.Fatal(err)
		}
		if base, err := d.VringBase(vq); err != nil || base != 5 {
			t.Errorf("vq %d base after detach %d, %v; want 5", vq, base, err)
		}
	}
	// Reset owner, then the device can be owned again.
	if err := d.ResetOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetOwner(); err != nil {
		t.Errorf("SetOwner after ResetOwner: %v", err)
	}
	d.Close()
	tap.Close()
	unix.Close(kick)
	unix.Close(call)
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open at the end, %d at the start", n, fds)
	}
}
