package macvtap_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// nodeState is what must not change about a node netctl does not own.
type nodeState struct {
	ino, rdev uint64
	mode      uint32
	mtime     unix.Timespec
}

func snapshotDir(t *testing.T, dir string) map[string]nodeState {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]nodeState{}
	for _, e := range es {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = nodeState{st.Ino, st.Rdev, st.Mode, st.Mtim}
	}
	return m
}

func sameDir(t *testing.T, what string, before, after map[string]nodeState) {
	t.Helper()
	for n, b := range before {
		if a, ok := after[n]; !ok {
			t.Errorf("%s: %s was removed", what, n)
		} else if a != b {
			t.Errorf("%s: %s changed: %+v, was %+v", what, n, a, b)
		}
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			t.Errorf("%s: %s was left behind", what, n)
		}
	}
}

// queueDevice names the device a tap or macvtap queue fd serves (TUNGETIFF).
func queueDevice(t *testing.T, fd int) string {
	t.Helper()
	var ifr linux.Ifreq
	if err := linux.Ioctl(fd, linux.TUNGETIFF, unsafe.Pointer(&ifr)); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(ifr.Name[:])
}

// TestHostMacvtapLeavesForeignNodesAlone: /dev is shared between network
// namespaces but ifindexes are not, so the tapN node for netctl's macvtap
// may be another macvtap's. Here every tap1..tap64 in the device directory
// is the node of a "host" macvtap netctl did not make (as udev made it):
// netctl must open its own queues anyway, through a private node, and
// leave every node, and the private directory, exactly as it was.
func TestHostMacvtapLeavesForeignNodesAlone(t *testing.T) {
	testenv.Host(t)
	priv := t.TempDir()
	t.Setenv("TMPDIR", priv) // where netctl makes its private node
	devDir := t.TempDir()
	lowerVeth(t, "nctlfn0")
	// The foreign macvtap, made without netctl.
	lower, _ := netlink.LinkByName("nctlfn0")
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex = "hostmv0", lower.Attrs().Index
	if err := netlink.LinkAdd(&netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}}); err != nil {
		t.Fatal(err)
	}
	host, _ := netlink.LinkByName("hostmv0")
	dev, err := os.ReadFile(fmt.Sprintf("/sys/class/net/hostmv0/macvtap/tap%d/dev", host.Attrs().Index))
	if err != nil {
		t.Fatal(err)
	}
	var maj, min uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(dev)), "%d:%d", &maj, &min); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 64; i++ {
		if err := unix.Mknod(fmt.Sprintf("%s/tap%d", devDir, i), unix.S_IFCHR|0o600, int(unix.Mkdev(maj, min))); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotDir(t, devDir)
	fds := testenv.OpenFDs(t)

	m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlfn1", Lower: "nctlfn0", Queues: 2, DevDir: devDir})
	if err != nil {
		t.Fatal(err)
	}
	if m.Ifindex() > 64 {
		t.Fatalf("ifindex %d: the test covers tap1..tap64 only", m.Ifindex())
	}
	for q := 0; q < m.Queues(); q++ {
		if got := queueDevice(t, m.QueueFD(q)); got != "nctlfn1" {
			t.Errorf("queue %d serves %q, want nctlfn1", q, got)
		}
	}
	sameDir(t, "device directory while the macvtap is open", before, snapshotDir(t, devDir))
	sameDir(t, "TMPDIR while the macvtap is open", map[string]nodeState{}, snapshotDir(t, priv))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	sameDir(t, "device directory after Close", before, snapshotDir(t, devDir))
	sameDir(t, "TMPDIR after Close", map[string]nodeState{}, snapshotDir(t, priv))
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after Close, %d before", n, fds)
	}

	// An empty device directory (no udev): netctl creates nothing there.
	empty := t.TempDir()
	m, err = macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlfn2", Lower: "nctlfn0", DevDir: empty})
	if err != nil {
		t.Fatal(err)
	}
	if got := queueDevice(t, m.QueueFD(0)); got != "nctlfn2" {
		t.Errorf("queue 0 serves %q, want nctlfn2", got)
	}
	sameDir(t, "empty device directory", map[string]nodeState{}, snapshotDir(t, empty))
	m.Close()
	sameDir(t, "empty device directory after Close", map[string]nodeState{}, snapshotDir(t, empty))
	sameDir(t, "TMPDIR after the second Close", map[string]nodeState{}, snapshotDir(t, priv))
}

// TestHostMacvtapOwnNodeInDev: with the default /dev, where devtmpfs makes
// tapN for the new macvtap, netctl opens that node (it is the macvtap's
// own), or a private node when a macvtap of another namespace holds that
// name, and leaves nothing of its own in /dev.
func TestHostMacvtapOwnNodeInDev(t *testing.T) {
	testenv.Host(t)
	t.Setenv("TMPDIR", t.TempDir())
	lowerVeth(t, "nctlod0")
	devBefore := map[string]bool{}
	es, _ := os.ReadDir("/dev")
	for _, e := range es {
		devBefore[e.Name()] = true
	}
	m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlod1", Lower: "nctlod0", Queues: 3})
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < 3; q++ {
		if got := queueDevice(t, m.QueueFD(q)); got != "nctlod1" {
			t.Errorf("queue %d serves %q, want nctlod1", q, got)
		}
	}
	tap := fmt.Sprintf("tap%d", m.Ifindex())
	// /dev/tapN is ours unless a macvtap with the same ifindex in another
	// namespace (another test process on this machine) got there first.
	dev, err := os.ReadFile(fmt.Sprintf("/sys/class/net/nctlod1/macvtap/%s/dev", tap))
	if err != nil {
		t.Fatal(err)
	}
	var maj, min uint32
	fmt.Sscanf(string(dev), "%d:%d", &maj, &min)
	var st unix.Stat_t
	ours := unix.Lstat("/dev/"+tap, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(maj, min)
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", m.QueueFD(0)))
	switch {
	case err != nil:
		t.Fatal(err)
	case ours && target != "/dev/"+tap:
		t.Errorf("queue 0 opened through %q, want devtmpfs's own /dev/%s", target, tap)
	case !ours && !strings.HasSuffix(target, "/"+tap+" (deleted)"):
		t.Errorf("/dev/%s is another namespace's macvtap, but queue 0 was opened through %q, not a private node", tap, target)
	case !ours:
		t.Logf("/dev/%s belongs to a macvtap in another namespace: opened through %s", tap, target)
	}
	m.Close()
	// Other processes may add and remove tapN nodes meanwhile; netctl's
	// own would be a netctl-macvtap-* directory.
	es, _ = os.ReadDir("/dev")
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "netctl-") && !devBefore[e.Name()] {
			t.Errorf("/dev/%s left behind", e.Name())
		}
	}
}

// TestHostMacvtapConflictWithoutPrivateNode: when the tapN node is another
// macvtap's and no private node can be opened (every candidate directory
// is on a nodev mount), CreateMacvtap fails with ErrConflict naming the
// node, and leaves no link, no fd and no file behind.
func TestHostMacvtapConflictWithoutPrivateNode(t *testing.T) {
	testenv.Host(t) // a private mount namespace: the tmpfs below stays in it
	nodev := t.TempDir()
	if err := unix.Mount("tmpfs", nodev, "tmpfs", unix.MS_NODEV, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(nodev, unix.MNT_DETACH) })
	t.Setenv("TMPDIR", nodev)
	lowerVeth(t, "nctlcf0")
	for i := 1; i <= 64; i++ {
		if err := unix.Mknod(fmt.Sprintf("%s/tap%d", nodev, i), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotDir(t, nodev)
	links, _ := netlink.LinkList()
	fds := testenv.OpenFDs(t)
	_, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Name: "nctlcf1", Lower: "nctlcf0", DevDir: nodev})
	if !errors.Is(err, macvtap.ErrConflict) || !strings.Contains(err.Error(), "is character device 1:3, not macvtap nctlcf1's") {
		t.Errorf("CreateMacvtap over a foreign node with no private node possible: %v, want ErrConflict naming the node", err)
	}
	t.Logf("refused: %v", err)
	sameDir(t, "device directory after the refusal", before, snapshotDir(t, nodev))
	if after, _ := netlink.LinkList(); len(after) != len(links) {
		t.Errorf("%d links after the refusal, %d before", len(after), len(links))
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after the refusal, %d before", n, fds)
	}
}
