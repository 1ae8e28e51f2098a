package macvtap_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/linux"
	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/macvtap"
)

// TestMain lets a test re-run this binary as another user (see asNobody).
func TestMain(m *testing.M) {
	if lower := os.Getenv("NETCTL_HELPER_MACVTAP"); lower != "" {
		m, err := macvtap.CreateMacvtap(macvtap.MacvtapConfig{Lower: lower})
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		m.Close()
		os.Exit(0)
	}
	if name := os.Getenv("NETCTL_HELPER_OPEN_TAP"); name != "" {
		tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: name, VnetHdr: true, TunDevice: os.Getenv("NETCTL_HELPER_TUN")})
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		tap.Close()
		os.Exit(0)
	}
	if os.Getenv("NETCTL_HELPER_PROBE_NS") != "" {
		// Probe several times, then say which network and mount
		// namespaces the process's main thread (/proc/self: the thread
		// group leader) is in: the probe's scratch goroutine may have
		// run on it.
		for i := 0; i < 8; i++ {
			if _, err := macvtap.ProbeOffloads(macvtap.KindTap); err != nil {
				fmt.Println(err)
				os.Exit(3)
			}
		}
		for _, ns := range []string{"net", "mnt"} {
			l, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				fmt.Println(err)
				os.Exit(3)
			}
			fmt.Println(l)
		}
		os.Exit(0)
	}
	if root := os.Getenv("NETCTL_HELPER_PROBE_CHROOT"); root != "" {
		// Chroot is process-wide (Go's threads share one fs_struct), so
		// the probe's own locked thread starts inside it too.
		if err := syscall.Chroot(root); err != nil {
			fmt.Println("chroot:", err)
			os.Exit(3)
		}
		if err := os.Chdir("/"); err != nil {
			fmt.Println("chdir:", err)
			os.Exit(3)
		}
		_, err := macvtap.ProbeOffloads(macvtap.KindTap)
		if err == nil {
			fmt.Println("probed without an error")
			os.Exit(4)
		}
		fmt.Println(err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// asNobody opens the tap called name in a child process running as uid
// and gid 65534, in the caller's network namespace, and returns its output.
func asNobody(t *testing.T, name string) (string, error) { return asNobodyWith(t, name, "") }

func asNobodyWith(t *testing.T, name, tunDev string) (string, error) {
	t.Helper()
	// go test's build directory is private to root: run a copy the user
	// can read.
	dir, err := os.MkdirTemp("", "netctl-helper-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/helper", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// This machine's /dev/net/tun is root-only (0600); give the child a
	// node it may open, as distributions that ship 0666 do.
	if err := unix.Mknod(dir+"/tun", unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir+"/tun", 0o666)
	cmd := exec.Command(dir+"/helper", "-test.run=^$")
	cmd.Dir = "/"
	if tunDev == "" {
		tunDev = dir + "/tun"
	}
	cmd.Env = append(os.Environ(), "NETCTL_HELPER_OPEN_TAP="+name, "NETCTL_HELPER_TUN="+tunDev)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestHostTapPersistentOwnerAndDelete(t *testing.T) {
	testenv.Host(t)
	owner := 65534
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlp0", VnetHdr: true, Persistent: true, Owner: &owner})
	if err != nil {
		t.Fatal(err)
	}
	tap.Close()
	l, err := netlink.LinkByName("nctlp0")
	if err != nil {
		t.Fatalf("a persistent tap went away with its fd: %v", err)
	}
	if tt := l.(*netlink.Tuntap); tt.Owner != 65534 {
		t.Errorf("owner %d, want 65534", tt.Owner)
	}
	// Its owner may open it without CAP_NET_ADMIN; nobody else may create taps.
	if out, err := asNobody(t, "nctlp0"); err != nil {
		t.Errorf("the owner could not open its persistent tap: %v: %s", err, out)
	}
	if st, err := os.Stat(macvtap.TunPath); err == nil && st.Mode().Perm()&0o006 == 0 {
		if out, err := asNobodyWith(t, "nctlp0", macvtap.TunPath); err == nil || !strings.Contains(out, "chmod 0666") {
			t.Errorf("a root-only %s: %v, %q; want an error that says how to let the user in", macvtap.TunPath, err, out)
		}
	}
	out, err := asNobody(t, "nctlnew0")
	if err == nil || !strings.Contains(out, "needs CAP_NET_ADMIN") {
		t.Errorf("an unprivileged create: %v: %q, want an error saying it needs CAP_NET_ADMIN", err, out)
	}
	lowerVeth(t, "nctlnr0")
	os.Setenv("NETCTL_HELPER_MACVTAP", "nctlnr0")
	out, err = asNobody(t, "unused")
	os.Unsetenv("NETCTL_HELPER_MACVTAP")
	if err == nil || !strings.Contains(out, "needs CAP_NET_ADMIN") {
		t.Errorf("an unprivileged macvtap: %v: %q, want an error saying it needs CAP_NET_ADMIN", err, out)
	}
	again, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlp0", VnetHdr: true})
	if err != nil {
		t.Fatalf("reopen the persistent tap: %v", err)
	}
	if err := again.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("nctlp0"); err == nil {
		t.Error("Delete left the tap behind")
	}
}

func TestHostTapMismatchIsExplained(t *testing.T) {
	testenv.Host(t)
	single, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlsq", VnetHdr: true, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Delete()
	single.Close()
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "nctltun"}, Mode: netlink.TUNTAP_MODE_TUN}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if l, err := netlink.LinkByName("nctltun"); err == nil {
			netlink.LinkDel(l)
		}
	}()
	fds := testenv.OpenFDs(t)
	for _, c := range []struct {
		cfg  macvtap.TapConfig
		want string
	}{
		{macvtap.TapConfig{Name: "nctlsq", VnetHdr: true, Queues: 4}, "exists as a single-queue tap, so it cannot have 4 queues"},
		{macvtap.TapConfig{Name: "nctltun", VnetHdr: true}, "exists as a tun (layer 3) device"},
		{macvtap.TapConfig{Name: "lo", VnetHdr: true}, "is a device link, not a tap"},
		{macvtap.TapConfig{Name: "nctlbig", Queues: 300}, "a tap has 1 to 256"},
	} {
		_, err := macvtap.CreateTap(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if n := testenv.OpenFDs(t); n != fds {
		t.Errorf("%d fds open after refused opens, %d before", n, fds)
	}
	if _, err := netlink.LinkByName("nctlbig"); err == nil {
		t.Error("a refused create left a link")
	}
}

func TestHostTapLinkAndHeaderSettings(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctlls0", VnetHdr: true, VnetHdrSize: 20, VnetLE: true, SndBuf: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if n, _ := tap.VnetHdrSize(); n != 20 {
		t.Errorf("header size %d, want 20", n)
	}
	if v, err := unix.IoctlGetInt(tap.FD(), uint(linux.TUNGETVNETLE)); err != nil || v != 1 {
		t.Errorf("little-endian header %d, %v", v, err)
	}
	if v, err := unix.IoctlGetInt(tap.FD(), uint(linux.TUNGETSNDBUF)); err != nil || v != 1<<20 {
		t.Errorf("send buffer %d, %v", v, err)
	}
	mac, _ := net.ParseMAC("02:00:00:00:42:01")
	if err := tap.SetMTU(9000); err != nil {
		t.Fatal(err)
	}
	if err := tap.SetMAC(mac); err != nil {
		t.Fatal(err)
	}
	if err := tap.Up(); err != nil {
		t.Fatal(err)
	}
	l, _ := netlink.LinkByName("nctlls0")
	if a := l.Attrs(); a.MTU != 9000 || a.HardwareAddr.String() != mac.String() || a.Flags&net.FlagUp == 0 {
		t.Errorf("link: mtu %d, address %s, flags %v", a.MTU, a.HardwareAddr, a.Flags)
	}
}

func TestHostTapOffloadsAndQueues(t *testing.T) {
	testenv.Host(t)
	tap, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctloq", VnetHdr: true, VnetHdrSize: 12, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if err := tap.SetOffloads(macvtap.OffloadTSO4); err == nil || !strings.Contains(err.Error(), "every offload needs csum") {
		t.Errorf("TSO4 without CSUM: %v", err)
	}
	if err := tap.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadUSO4); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("USO4 alone: %v", err)
	}
	if err := tap.SetOffloads(macvtap.OffloadCSUM | macvtap.OffloadTSO4); err != nil || tap.Offloads() != macvtap.OffloadCSUM|macvtap.OffloadTSO4 {
		t.Errorf("set csum|tso4: %v, now %v", err, tap.Offloads())
	}
	if err := tap.DetachQueue(1); err != nil {
		t.Fatal(err)
	}
	if l, _ := netlink.LinkByName("nctloq"); l.(*netlink.Tuntap).DisabledQueues != 1 {
		t.Errorf("after detaching queue 1: %+v", l.(*netlink.Tuntap))
	}
	if err := tap.AttachQueue(1); err != nil {
		t.Fatal(err)
	}
	one, err := macvtap.CreateTap(macvtap.TapConfig{Name: "nctl1q", VnetHdr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if err := one.DetachQueue(0); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "only multiqueue taps") {
		t.Errorf("detach on a single-queue tap: %v", err)
	}
}
