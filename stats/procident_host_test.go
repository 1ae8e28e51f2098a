package stats

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/qemuproc"
)

// TestHostReadRefusesSetuidExec: a QEMU run by a trusted user (here
// nobody, trusted for the test as libvirt-qemu would be) that execs a
// setuid-root program, still named qemu-system-x86_64, has real uid
// nobody and effective uid 0 (setpriv gives those ids directly). The
// first read of a fresh netctl (a new `netctl stats`, an exporter
// restart) has no earlier identity to compare with, and an effective uid
// 0 owns /proc/PID whether the process is dumpable or not: before the
// fix root netctl read the program's memory (its ELF header, 0x457f).
// Mixed real and effective ids are a set-id program, never a QEMU.
func TestHostReadRefusesSetuidExec(t *testing.T) {
	testenv.Host(t)
	trustOnce.Do(func() { trust, trustErr = qemuproc.DefaultTrust() })
	if trustErr != nil {
		t.Fatal(trustErr)
	}
	saved := trust
	trust = qemuproc.Trust{UIDs: maps.Clone(saved.UIDs)}
	trust.UIDs[65534] = "nobody (test)"
	t.Cleanup(func() { trust = saved })

	// What a setuid-root program run by nobody is: real uid and gid
	// nobody, effective uid root (set here with setresuid, since a
	// setuid bit does nothing under no_new_privs, as in some sandboxes).
	prog := "/usr/bin/sleep"
	if _, err := os.Stat(prog); err != nil {
		prog = "/bin/sleep"
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "NETCTL_TEST_SLEEPER=setid", "NETCTL_TEST_EXEC="+prog)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid := cmd.Process.Pid
	sleep := ""
	for end := time.Now().Add(10 * time.Second); sleep != prog && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		sleep, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	t.Logf("pid %d runs %s; ids: %q", pid, sleep, statusLines(st))
	v, err := readU16s(pid, []uint64{elfHeaderAddr(t, pid, sleep)})
	if err == nil || !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("a set-id program named qemu-system-x86_64 (pid %d, real uid nobody, effective root): the read gave %#x, %v; want a refusal (ErrNotAvailable)", pid, v, err)
	}
	t.Logf("refused: %v", err)
}

func statusLines(b []byte) []string {
	var out []string
	for _, k := range []string{"Uid:", "Gid:"} {
		for _, l := range splitLines(b) {
			if len(l) > len(k) && l[:len(k)] == k {
				out = append(out, l)
			}
		}
	}
	return out
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

// TestHostReadRefusesNonDumpable: a process that asked not to be read
// (prctl PR_SET_DUMPABLE 0, as ssh-agent and gpg-agent do; and every
// process after a set-id exec) under a trusted uid and a QEMU's name.
// The kernel owns /proc/PID itself by the effective ids whatever the
// process's dumpable flag (task_dump_owner's exception for the
// directory); only its files (stat, status) go to root. Before the fix
// the check looked at the directory and never saw it: root netctl read
// the program's ELF header.
func TestHostReadRefusesNonDumpable(t *testing.T) {
	testenv.Host(t)
	trustOnce.Do(func() { trust, trustErr = qemuproc.DefaultTrust() })
	if trustErr != nil {
		t.Fatal(trustErr)
	}
	saved := trust
	trust = qemuproc.Trust{UIDs: maps.Clone(saved.UIDs)}
	trust.UIDs[65534] = "nobody (test)"
	t.Cleanup(func() { trust = saved })

	// This test binary, named qemu-system-x86_64 (its init, see
	// procerr_vm_test.go). Run by nobody, it needs an executable nobody
	// can reach: a copy outside the test's private directories.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := copyExecutable(t, self)
	cmd := &exec.Cmd{Path: exe, Args: []string{"qemu-system-x86_64"}, Env: append(os.Environ(), "NETCTL_TEST_SLEEPER=nodump"),
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}}
	out, err := cmd.StdoutPipe()
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
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("the non-dumpable process: %v", err)
	}
	pid := cmd.Process.Pid
	exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	v, err := readU16s(pid, []uint64{elfHeaderAddr(t, pid, exe)})
	if err == nil || !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("a non-dumpable process named qemu-system-x86_64 (pid %d, %s): the read gave %#x, %v; want a refusal (ErrNotAvailable)", pid, exe, v, err)
	}
	t.Logf("refused: %v", err)
}

// copyExecutable copies the file at path into a fresh directory under
// /tmp that every user can enter, mode 0755, and returns the copy's path
// (removed at the test's end).
func copyExecutable(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "netctl-stats-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := dir + "/qemu-system-x86_64"
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}
