package macvtap_test

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestHostTapOwnQueuesRaceChangesNothing: another process attaches a
// queue to a persistent multiqueue tap between CreateTap's first count
// and its opens (OwnQueues). CreateTap must refuse (ErrBusy) and leave
// the other's tap as it was: the virtio-net header size, its byte order
// and the send buffer are the device's (tun->vnet_hdr_sz, tun->flags,
// tun->sndbuf), not a queue's, so setting them on CreateTap's own queues
// before the second count changes the other VM's tap.
func TestHostTapOwnQueuesRaceChangesNothing(t *testing.T) {
	testenv.Host(t)
	const name = "nctlrvq0"
	tp, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, Queues: 2, Persistent: true, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close() // persistent, no queue attached
	other := -1
	defer func() {
		if other >= 0 {
			unix.Close(other)
		}
	}()
	defer macvtap.SetTapOpensHook(func() {
		// Another VM takes a queue now.
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("open /dev/net/tun: %v", err)
			return
		}
		var ifr linux.Ifreq
		copy(ifr.Name[:], name)
		ifr.Flags = linux.IFF_TAP | linux.IFF_NO_PI | linux.IFF_VNET_HDR | linux.IFF_MULTI_QUEUE
		if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
			t.Errorf("the other's queue: %v", err)
			unix.Close(fd)
			return
		}
		other = fd
	})()
	_, err = macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, Queues: 2, OwnQueues: true,
		VnetHdrSize: 12, VnetLE: true, SndBuf: 65536})
	if !errors.Is(err, macvtap.ErrBusy) {
		t.Fatalf("CreateTap with OwnQueues while another process attached a queue: %v; want ErrBusy", err)
	}
	if other < 0 {
		t.Fatal("the other queue was not attached")
	}
	hdr, err := unix.IoctlGetInt(other, uint(linux.TUNGETVNETHDRSZ))
	if err != nil {
		t.Fatal(err)
	}
	if hdr != 10 {
		t.Errorf("the other's tap has a %d-byte virtio-net header now; it had 10", hdr)
	}
	sb, err := unix.IoctlGetInt(other, uint(linux.TUNGETSNDBUF))
	if err != nil {
		t.Fatal(err)
	}
	if sb != math.MaxInt32 {
		t.Errorf("the other's tap has send buffer %d now; it had %d", sb, math.MaxInt32)
	}
	le, err := unix.IoctlGetInt(other, uint(linux.TUNGETVNETLE))
	if err == nil && le != 0 {
		t.Errorf("the other's tap has a little-endian header set now (TUNGETVNETLE %d)", le)
	}
}
