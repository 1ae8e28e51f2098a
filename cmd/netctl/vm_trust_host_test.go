package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
)

// copyExe copies this test binary to dir/name with mode, owned by uid.
func copyExe(t *testing.T, dir, name string, uid int, mode os.FileMode) string {
	t.Helper()
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, name)
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// startFakeQEMUAs runs the fake QEMU (fakeQEMUMain) from exe as uid, as
// "qemu-system-x86_64 -name NAME -qmp unix:SOCK,server=on,wait=off".
func startFakeQEMUAs(t *testing.T, exe, sockDir, name string, uid uint32) int {
	t.Helper()
	sock := filepath.Join(sockDir, fmt.Sprintf("qmp-%d-%d.sock", uid, time.Now().UnixNano()))
	cmd := &exec.Cmd{Path: exe, Args: []string{"qemu-system-x86_64", "-name", name, "-qmp", "unix:" + sock + ",server=on,wait=off"},
		Env: append(os.Environ(), "NETCTL_TEST_FAKE_QEMU=1"), Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil { // listening, not only bound
			c.Close()
			return cmd.Process.Pid
		}
		if time.Now().After(end) {
			t.Fatal("the fake QEMU never made its socket")
		}
	}
}

// TestHostVMUntrustedQEMU: --vm NAME used to take any process whose argv[0]
// looks like qemu-system-* with -name NAME. A fake run by nobody, and a
// fake run by root from an executable nobody owns, are not QEMUs netctl
// trusts: with the real VM down, attach --vm must refuse and say which
// candidates it passed by and why (before the fix it connected to the
// fake, to hand it a tap); with a trusted QEMU of that name running, the
// fakes must not make attach or detach refuse as ambiguous (before the
// fix: "3 QEMU processes are named").
func TestHostVMUntrustedQEMU(t *testing.T) {
	testenv.Host(t)
	t.Setenv("NETCTL_RUN_DIR", filepath.Join(t.TempDir(), "run"))
	dir, err := os.MkdirTemp("", "netctl-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sockDir := filepath.Join(dir, "socks")
	os.Mkdir(sockDir, 0o1777)
	os.Chmod(sockDir, 0o1777)
	rootExe := copyExe(t, dir, "qemu-root", 0, 0o755)
	nobodyExe := copyExe(t, dir, "qemu-nobody", 65534, 0o755)
	name := fmt.Sprintf("nctl-trust-%d", os.Getpid())

	byNobody := startFakeQEMUAs(t, rootExe, sockDir, name, 65534)
	fromNobodysFile := startFakeQEMUAs(t, nobodyExe, sockDir, name, 0)
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := runMain(append([]string{"netctl"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	code, out := run("attach", "--vm", name, "--id", "n1", "--backend", "userspace")
	t.Logf("attach --vm with only untrusted fakes: exit %d: %s", code, out)
	if code == 0 || !strings.Contains(out, "no VM named") || !strings.Contains(out, fmt.Sprintf("pid %d", byNobody)) ||
		!strings.Contains(out, "uid 65534") || !strings.Contains(out, fmt.Sprintf("pid %d", fromNobodysFile)) || !strings.Contains(out, "qemu-nobody") {
		t.Errorf("attach --vm %s with only untrusted fakes: exit %d, %q; want a refusal naming both fakes and why each was passed by", name, code, out)
	}

	trusted := startFakeQEMUAs(t, rootExe, sockDir, name, 0)
	code, out = run("attach", "--vm", name, "--id", "n1", "--backend", "userspace")
	t.Logf("attach --vm with a trusted fake too: exit %d: %s", code, out)
	if strings.Contains(out, "processes are named") || !strings.Contains(out, "query-version") {
		t.Errorf("attach --vm %s: %q; want it to reach the trusted QEMU (pid %d), whose fake answers query-version with an error", name, out, trusted)
	}
	code, out = run("detach", "--vm", name, "--id", "n1")
	t.Logf("detach --vm with a trusted fake too: exit %d: %s", code, out)
	if strings.Contains(out, "processes are named") {
		t.Errorf("detach --vm %s: %q; the untrusted fakes made it ambiguous", name, out)
	}
}
