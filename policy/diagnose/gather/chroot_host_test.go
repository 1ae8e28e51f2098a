package gather

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/policy/diagnose"
)

// TestHostReadTapThroughOtherNode: a QEMU in a chroot or a container
// opens its own tun node, so from outside its tap fd reads as another
// path than /dev/net/tun. diagnose finds the tap by tun's "iff:" line in
// fdinfo all the same (issue 11, defect 2).
func TestHostReadTapThroughOtherNode(t *testing.T) {
	testenv.Host(t) // a private mount namespace too: the bind mount stays in it
	root := t.TempDir()
	node := filepath.Join(root, "dev", "net", "tun")
	if err := os.MkdirAll(filepath.Dir(node), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(node, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/dev/net/tun", node, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind /dev/net/tun into the chroot: %v", err)
	}
	defer unix.Unmount(node, unix.MNT_DETACH)
	fd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var ifr linux.Ifreq
	copy(ifr.Name[:], "diagc0")
	ifr.Flags = linux.IFF_TAP | linux.IFF_NO_PI | linux.IFF_VNET_HDR
	if err := linux.Ioctl(fd, linux.TUNSETIFF, unsafe.Pointer(&ifr)); err != nil {
		t.Fatal(err)
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || target == "/dev/net/tun" || !strings.HasPrefix(target, root) {
		t.Fatalf("the fd reads as %q (%v), want a path under %s", target, err, root)
	}

	for _, opts := range []map[string]string{{"ifname": "diagc0"}, nil, {"fd": strconv.Itoa(fd)}} {
		s := &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: opts}}
		readTap(s, os.Getpid())
		if s.Tap == nil || s.Tap.Name != "diagc0" || !s.Tap.VnetHdr || s.Tap.HdrLen != 10 || len(s.Errors) > 0 {
			t.Errorf("options %v: tap %+v, notes %v", opts, s.Tap, s.Errors)
		}
	}

	// ifname= already set, but no such tap: the note does not ask for it.
	s := &diagnose.Snapshot{Netdev: diagnose.Netdev{Type: "tap", Options: map[string]string{"ifname": "diagzz"}}}
	readTap(s, os.Getpid())
	if s.Tap != nil || len(s.Errors) != 1 || strings.Contains(s.Errors[0], "name the NIC's netdev with ifname=") ||
		!strings.Contains(s.Errors[0], "holds no tap named diagzz") {
		t.Errorf("ifname set, no such tap: %+v, %v", s.Tap, s.Errors)
	}
}
