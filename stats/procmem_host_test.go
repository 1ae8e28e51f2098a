package stats

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// elfHeaderAddr is where process pid maps the start of the file path
// (its ELF header, "\x7fELF"), from /proc/PID/maps.
func elfHeaderAddr(t *testing.T, pid int, path string) uint64 {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 6 && f[2] == "00000000" && f[5] == path {
				a, _, _ := strings.Cut(f[0], "-")
				v, err := strconv.ParseUint(a, 16, 64)
				if err == nil {
					return v
				}
			}
		}
	}
	t.Fatalf("pid %d never mapped %s", pid, path)
	return 0
}

// fakeQEMUShell runs bash as "qemu-system-x86_64" (so it looks like a
// QEMU by argv[0]) as uid, which execs /bin/sleep, still called
// qemu-system-x86_64, once a line arrives on its stdin.
func fakeQEMUShell(t *testing.T, uid uint32) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := &exec.Cmd{Path: "/bin/bash", Args: []string{"qemu-system-x86_64", "-c", "read x; exec -a qemu-system-x86_64 /bin/sleep 300"},
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, in
}

// TestHostReadRefusesAnotherProcess: the stats read ring indices with
// process_vm_readv from the pid SO_PEERCRED named. A process with QEMU's
// name that execs another program under the same pid (and the same start
// time) must not be read: here a root "qemu-system-x86_64" (bash) is read
// once, then execs /bin/sleep, still named qemu-system-x86_64; and a
// "QEMU" run by nobody is never read. Before the fix both reads returned
// the ELF header of the program ("\x7fE" = 0x457f) to root netctl.
func TestHostReadRefusesAnotherProcess(t *testing.T) {
	testenv.Host(t)
	cmd, in := fakeQEMUShell(t, 0)
	pid := cmd.Process.Pid
	bash, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	v, err := readU16s(pid, []uint64{elfHeaderAddr(t, pid, bash)})
	if err != nil || v[0] != 0x457f {
		t.Fatalf("reading the root fake QEMU %s (pid %d): %v, %v; want 0x457f", bash, pid, v, err)
	}
	fmt.Fprintln(in, "exec")
	sleep := ""
	for end := time.Now().Add(10 * time.Second); sleep != "/usr/bin/sleep" && sleep != "/bin/sleep" && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		sleep, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	}
	v, err = readU16s(pid, []uint64{elfHeaderAddr(t, pid, sleep)})
	if err == nil || !errors.Is(err, ErrNotAvailable) {
		t.Errorf("pid %d became %s (same pid and start time); the read gave %#x, %v; want a refusal (ErrNotAvailable)", pid, sleep, v, err)
	} else {
		t.Logf("after the exec: %v", err)
	}

	nob, _ := fakeQEMUShell(t, 65534)
	v, err = readU16s(nob.Process.Pid, []uint64{elfHeaderAddr(t, nob.Process.Pid, bash)})
	if err == nil || !errors.Is(err, ErrNotAvailable) {
		t.Errorf("a \"QEMU\" run by nobody (pid %d): the read gave %#x, %v; want a refusal", nob.Process.Pid, v, err)
	} else {
		t.Logf("nobody's: %v", err)
	}
}
