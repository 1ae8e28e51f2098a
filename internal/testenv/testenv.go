// Package testenv tells netctl's tests which layer they run in and what
// the kernel there is known to have.
//
// Four layers: pure tests run anywhere; host tests (Host) need root and run
// in a throwaway network namespace; VM tests (VM) run only in the test VM
// (make test-vm), where the harness exports the kernel's name and its known
// capabilities. A VM test whose kernel is known to have a capability must
// fail, not skip, when it is missing: use Kernel.Has to decide what to
// expect, never the presence of a device node. Require does this for a
// test that needs one capability: it fails where the capability should be
// and is not, and where the kernel lacks it, runs a check of what the code
// does there and ends the test, so that no test reports PASS having
// checked nothing.
package testenv

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/macvtap"
)

// Kernel is the VM kernel a test runs on.
type Kernel struct {
	Name    string          // "6.12", "6.1"
	caps    map[string]bool // capabilities the kernel is known to have
	Missing []string        // modules this kernel does not have at all
}

// Has reports whether the kernel is known to have capability c (see the
// Cap* constants of test/vm: "vhost_net", "vduse", "tun_uso", ...).
func (k *Kernel) Has(c string) bool { return k.caps[c] }

// InVM reports whether this process runs in netctl's test VM.
func InVM() bool { return os.Getenv("NETCTL_VM_KERNEL") != "" }

// VM skips the test unless it runs in the test VM, and returns the kernel.
func VM(t testing.TB) *Kernel {
	t.Helper()
	name := os.Getenv("NETCTL_VM_KERNEL")
	if name == "" {
		t.Skip("needs the test VM's kernel: run make test-vm")
	}
	k := &Kernel{Name: name, caps: map[string]bool{}}
	for _, c := range strings.Split(os.Getenv("NETCTL_VM_CAPS"), ",") {
		if c != "" {
			k.caps[c] = true
		}
	}
	if m := os.Getenv("NETCTL_VM_MISSING"); m != "" {
		k.Missing = strings.Split(m, ",")
	}
	return k
}

// Host makes the calling test a host test (do not use t.Run after it: a
// subtest runs on another thread, outside the namespaces): it needs root (CAP_NET_ADMIN)
// and runs the rest of the test in a new, empty network namespace with lo
// up, so nothing it creates touches the machine's interfaces, and in a new
// mount namespace whose /sys shows that network namespace. Without root
// the test is skipped, unless NETCTL_TEST_HOST=1 (make test-host), where it
// fails.
//
// The test goroutine stays locked to its OS thread; when the test returns,
// the Go runtime ends that thread and the namespace (with every link the
// test left in it) goes away.
func Host(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("NETCTL_TEST_HOST") == "1" {
			t.Fatal("host tests need root (CAP_NET_ADMIN): run make test-host as root")
		}
		t.Skip("needs root: run make test-host as root")
	}
	runtime.LockOSThread() // never unlocked: the thread dies with the test
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); err != nil {
		t.Fatalf("unshare(CLONE_NEWNET|CLONE_NEWNS): %v", err)
	}
	// A private /sys that shows this namespace's devices (as ip netns
	// exec does), without the mount reaching the machine's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make mounts private: %v", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		t.Fatalf("mount a private /sys: %v", err)
	}
	if err := macvtap.LinkUp("lo"); err != nil {
		t.Fatalf("bring lo up: %v", err)
	}
}

// OpenFDs counts this process's open file descriptors (/proc/self/fd),
// for tests that check nothing leaked.
func OpenFDs(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es) - 1 // the directory's own fd
}

// LinkUp brings an interface of the test's namespace up.
func LinkUp(t testing.TB, name string) {
	t.Helper()
	if err := macvtap.LinkUp(name); err != nil {
		t.Fatalf("bring %s up: %v", name, err)
	}
}

// Go runs fn in a new goroutine whose OS thread has joined the calling
// test's network namespace (after Host), so that what fn starts (a QEMU
// with a tap netdev) lives there too and not on the machine. A plain go
// statement would run on an arbitrary thread in the machine's namespace.
// The mount namespace stays the machine's: a multithreaded process cannot
// switch it.
func Go(t testing.TB, fn func()) {
	t.Helper()
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with fn
		err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
		ns.Close()
		ready <- err
		if err == nil {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("setns into the test's network namespace: %v", err)
	}
}
