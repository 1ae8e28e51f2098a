package guest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netctl/netctl/test/vm"
)

// HostAddr puts cidr on link and brings it up, in the network namespace
// of the calling thread (the test's, after testenv.Host), or fails the
// test.
func HostAddr(t testing.TB, link, cidr string) {
	t.Helper()
	l, err := netlink.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		t.Fatalf("address %s on %s: %v", cidr, link, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

// HostPing pings addr count times from the test's namespace with the VM
// cache's static busybox (the machine has no ping of its own), and fails
// the test unless every ping is answered. Call it from the test
// goroutine, so that ping runs in the test's network namespace.
func HostPing(t testing.TB, addr string, count int) {
	t.Helper()
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bb := filepath.Join(cache, "busybox", "bin", "busybox")
	out, err := exec.Command(bb, "ping", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "5", addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d packets transmitted, %d packets received", count, count)) {
		t.Fatalf("host ping %s: %v\n%s", addr, err, out)
	}
}
