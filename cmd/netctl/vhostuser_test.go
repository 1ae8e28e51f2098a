package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netctl/netctl/hook"
)

// TestMain lets tests run this test binary as netctl itself
// (NETCTL_TEST_AS_NETCTL=1), for commands that must run in a process of
// their own, such as netctl vhost-user (it drops privileges and re-executes
// itself as its reaper) in the VM, where no go toolchain builds the binary.
func TestMain(m *testing.M) {
	if os.Getenv("NETCTL_TEST_FAKE_QEMU") == "1" { // see termsafe_test.go
		os.Exit(fakeQEMUMain())
	}
	if os.Getenv("NETCTL_TEST_AS_NETCTL") == "1" {
		os.Exit(runMain(os.Args, os.Stdout, os.Stderr))
	}
	os.Exit(runTests(m))
}

// runTests runs the package's tests with the hook's default log in a
// temporary directory, and fails the run if the machine's own hook log
// (/var/log/netctl/hook.log) changed meanwhile: no test may write there.
func runTests(m *testing.M) int {
	d, err := os.MkdirTemp("", "netctl-hooklog-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(d)
	hookDefaultLog = filepath.Join(d, "hook.log")
	size := func() int64 {
		st, err := os.Stat(hook.DefaultLogPath)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	before := size()
	rc := m.Run()
	if after := size(); after != before {
		fmt.Fprintf(os.Stderr, "FAIL: the tests wrote to the machine's hook log %s (%d -> %d bytes)\n", hook.DefaultLogPath, before, after)
		return 1
	}
	return rc
}

func TestVhostUserUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tap", "t0"}, "--socket is required"},
		{[]string{"--socket", "/run/x.sock"}, "exactly one of --tap NAME and --macvtap"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--macvtap", "eth0"}, "exactly one of"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--queues", "0"}, "--queues 0: use 1 to 128"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--queues", "129"}, "use 1 to 128"},
		{[]string{"--socket", "x.sock", "--tap", "t0"}, "absolute path"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--profile", "fast"}, "use throughput, latency or compat"},
		{[]string{"--socket", "/run/x.sock", "--macvtap", "eth0:loud"}, "unknown mode"},
		{[]string{"--socket", "/run/x.sock", "--macvtap", ":bridge"}, "LOWER[:MODE]"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--owner", "no-such-user-netctl"}, "give a user name or uid that exists"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--owner", "root"}, "other than root"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--owner", "0:5"}, "other than root"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--owner", "5:no-such-group-netctl"}, "group name or gid"},
		{[]string{"--socket", "/run/x.sock", "--tap", "t0", "--handshake-timeout", "-1s"}, "--handshake-timeout -1s: use 0 (no deadline) or more"},
	} {
		var stdout, stderr bytes.Buffer
		code := runMain(append([]string{"netctl", "vhost-user"}, c.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("netctl vhost-user %v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr.String(), c.want)
		}
		if _, err := os.Lstat("/run/x.sock"); err == nil {
			t.Errorf("netctl vhost-user %v left /run/x.sock", c.args)
		}
	}
}

// asNetctl is a command that runs this test binary as netctl.
func asNetctl(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "NETCTL_TEST_AS_NETCTL=1")
	return cmd
}

// execAsNetctl runs netctl args in a process of its own.
func execAsNetctl(t *testing.T, args ...string) result {
	t.Helper()
	cmd := asNetctl(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("netctl %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// TestReaperDeath: startReaper's watch on the reaper. Killed before it was
// told to clean up, the reaper is reported once with its pid and how it
// ended; told to (the pipe closed), its exit is not a death.
func TestReaperDeath(t *testing.T) {
	t.Setenv("NETCTL_TEST_AS_NETCTL", "1") // the reaper is this test binary run as netctl
	type death struct {
		pid int
		how error
	}
	died := make(chan death, 2)
	report := func(pid int, how error) { died <- death{pid, how} }

	p, err := startReaper("", 0, "", 0, report)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if !eventually(func() bool { pid = childPID(os.Getpid(), "vhost-user-reap"); return pid != 0 }) {
		t.Fatal("no vhost-user-reap child")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d := <-died
	if d.pid != pid || d.how == nil || d.how.Error() != "signal: killed" {
		t.Errorf("reported pid %d, %v; want pid %d, signal: killed", d.pid, d.how, pid)
	}
	p.Close()
	if w := reaperDied(d.pid, d.how, "/run/vu.sock", "nvu0"); w != fmt.Sprintf("vhost-user: warning: the cleanup helper (pid %d) died (signal: killed): "+
		"on exit the socket /run/vu.sock and macvtap nvu0 will be left; remove them as root with 'rm -f /run/vu.sock' and 'ip link delete nvu0'", pid) {
		t.Errorf("warning %q", w)
	}
	if w := reaperDied(7, d.how, "/run/vu.sock", ""); !strings.HasSuffix(w, "on exit the socket /run/vu.sock will be left; remove it as root with 'rm -f /run/vu.sock'") {
		t.Errorf("warning without a link: %q", w)
	}

	// Told to clean up: it exits, and that is no death.
	p, err = startReaper("", 0, "", 0, report)
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { pid = childPID(os.Getpid(), "vhost-user-reap"); return pid != 0 }) {
		t.Fatal("no vhost-user-reap child")
	}
	p.Close()
	if !eventually(func() bool { return syscall.Kill(pid, 0) != nil }) { // reaped by startReaper's Wait
		t.Fatalf("the reaper (pid %d) did not exit after its pipe closed", pid)
	}
	select {
	case d := <-died:
		t.Errorf("a reaper told to clean up was reported dead: %+v", d)
	default:
	}
}
