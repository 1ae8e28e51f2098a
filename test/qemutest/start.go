package qemutest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/netctl/netctl/qmp"
)

// Binary returns the path of qemu-system-x86_64, or fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64: %v (make vm-deps installs it)", err)
	}
	return bin
}

// Start starts a paused QEMU with no devices and no display:
//
//	qemu-system-x86_64 -S -nodefaults -display none [-machine pc] ARGS...
//
// -machine pc is added unless args name a machine (-machine or -M). dir
// is QEMU's working directory ("" for the test's); extra become its fds
// 3, 4, ... (the caller still owns and closes its copies). QEMU is killed
// and reaped when the test ends. Call it from the test goroutine.
func Start(t testing.TB, dir string, extra []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	base := []string{"-S", "-nodefaults", "-display", "none"}
	if !slices.Contains(args, "-machine") && !slices.Contains(args, "-M") {
		base = append(base, "-machine", "pc")
	}
	cmd := exec.Command(Binary(t), append(base, args...)...)
	cmd.Dir = dir
	cmd.ExtraFiles = extra
	logPath := filepath.Join(t.TempDir(), "qemu-stderr.log")
	stderr, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	err = cmd.Start()
	stderr.Close() // QEMU has its own copy
	if err != nil {
		t.Fatalf("start QEMU: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if b, _ := os.ReadFile(logPath); len(b) > 0 {
			t.Logf("QEMU %d said: %s", cmd.Process.Pid, b)
		}
	})
	return cmd
}

// StartPaused starts a paused QEMU (Start: no guest, -machine pc unless
// args name one) called name, with a QMP monitor on a socket in a
// temporary directory, and waits until the monitor answers. It returns
// the socket and QEMU's command (cmd.Process.Pid is QEMU's pid).
func StartPaused(t testing.TB, name string, args ...string) (sock string, cmd *exec.Cmd) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "qmp.sock")
	cmd = Start(t, "", nil, append([]string{"-name", name, "-qmp", "unix:" + sock + ",server=on,wait=off"}, args...)...)
	WaitQMP(t, sock)
	return sock, cmd
}

// WaitQMP waits up to 30 s until QEMU's QMP monitor at sock answers a
// handshake, and hangs up.
func WaitQMP(t testing.TB, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := qmp.Dial(ctx, sock)
		if err == nil {
			c.Close()
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("QEMU's QMP socket %s never answered: %v", sock, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
