package stats

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// TestVMProcErr: the real kernel's refusal of process_vm_readv to a root
// thread without CAP_SYS_PTRACE (as in a container that drops it), with
// Yama's ptrace_scope as booted and at 2, is explained as that, never as
// "run netctl as root". The target is this test binary sleeping as
// qemu-system-x86_64 (netctl reads only a QEMU it trusts), readable with
// the capability (checked first). Runs in the 6.12 and 6.1 VMs; both kernels
// have Yama.
func TestVMProcErr(t *testing.T) {
	testenv.VM(t)
	// Named as a QEMU: netctl reads no other program's memory
	// (checkReadable), and this test is about what the kernel refuses.
	// The VM's sleep is busybox, which goes by argv[0]: this test
	// binary sleeps instead (init, below; a TestVM test that skips
	// would fail the VM layer's testcheck).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sleep := &exec.Cmd{Path: exe, Args: []string{"qemu-system-x86_64"}, Env: append(os.Environ(), "NETCTL_TEST_SLEEPER=1")}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	pid := sleep.Process.Pid
	addr := firstMapping(t, pid)
	if _, err := readU16s(pid, []uint64{addr}); err != nil {
		t.Fatalf("root with CAP_SYS_PTRACE cannot read sleep's memory at %#x: %v", addr, err)
	}
	scopeFile := "/proc/sys/kernel/yama/ptrace_scope"
	b, err := os.ReadFile(scopeFile)
	if err != nil {
		t.Fatalf("Yama: %v (both test kernels have it)", err)
	}
	scope := strings.TrimSpace(string(b))
	if scope == "3" {
		t.Fatal("ptrace_scope is 3 at boot: nothing can be read")
	}

	// read runs readU16s on a thread of its own whose capabilities lose
	// CAP_SYS_PTRACE (effective only, or permitted too), then ends with
	// the thread (it stays locked).
	read := func(permittedToo bool) error {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				done <- err
				return
			}
			bit := uint32(1) << (unix.CAP_SYS_PTRACE % 32)
			data[unix.CAP_SYS_PTRACE/32].Effective &^= bit
			if permittedToo {
				data[unix.CAP_SYS_PTRACE/32].Permitted &^= bit
				data[unix.CAP_SYS_PTRACE/32].Inheritable &^= bit
			}
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				done <- err
				return
			}
			_, err := readU16s(pid, []uint64{addr})
			done <- err
		}()
		return <-done
	}
	check := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, unix.EPERM) {
			t.Fatalf("readU16s without CAP_SYS_PTRACE: %v, want EPERM", err)
		}
		msg := err.Error()
		t.Log(msg)
		if strings.Contains(msg, "run netctl as root") {
			t.Errorf("%q tells root to run as root", msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q lacks %q", msg, w)
			}
		}
	}

	t.Run("root without CAP_SYS_PTRACE", func(t *testing.T) {
		check(t, read(true), "without CAP_SYS_PTRACE", "--cap-add SYS_PTRACE")
	})
	t.Run("Yama ptrace_scope 2", func(t *testing.T) {
		if err := os.WriteFile(scopeFile, []byte("2"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(scopeFile, []byte(scope), 0o644); err != nil {
				t.Errorf("restoring ptrace_scope %s: %v", scope, err)
			}
		}()
		check(t, read(false), "without CAP_SYS_PTRACE", "kernel.yama.ptrace_scope is 2")
	})
}

// firstMapping is the start of pid's first mapping.
func firstMapping(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	start, _, _ := strings.Cut(string(b), "-")
	v, err := strconv.ParseUint(start, 16, 64)
	if err != nil {
		t.Fatalf("/proc/%d/maps: %q", pid, b)
	}
	return v
}
