package qemuproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/internal/testenv"
	"github.com/netctl/netctl/test/qemutest"
)

// TestResolveRefuses: the --vm/--qmp mistakes are ErrInvalid with a
// message that says what to pass, and nothing is dialed.
func TestResolveRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sock, want string }{
		{"a", "/b", "not both"},
		{"", "", "--vm NAME"},
		{"", filepath.Join(dir, "missing"), "QEMU's QMP socket"},
		{"", file, "is not a socket"},
	} {
		_, err := Resolve(ctx, tc.name, tc.sock)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%q, %q) = %v, want ErrInvalid saying %q", tc.name, tc.sock, err, tc.want)
		}
	}
}

// TestResolveNotQMP: a unix socket whose server does not speak QMP (here
// one that greets with something else) is ErrInvalid, quickly.
func TestResolveNotQMP(t *testing.T) {
	sock := qemutest.NotQMP(t, "SSH-2.0-OpenSSH_9.2\r\n", time.Second)
	start := time.Now()
	_, err := Resolve(context.Background(), "", sock)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a QEMU QMP socket") {
		t.Errorf("Resolve(non-QMP socket) = %v", err)
	}
	if d := time.Since(start); d > GreetingTimeout+time.Second {
		t.Errorf("took %v", d)
	}
}

// TestDialSilentIsBusy: a socket that accepts and says nothing (QEMU with
// a client already: the kernel queues the second connection) is ErrBusy
// within GreetingTimeout, and Dial's error says the monitor is in use.
func TestDialSilentIsBusy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // never accepts: connections wait in the backlog
	start := time.Now()
	vm := VM{PID: 1, Name: "web1", Monitors: []Monitor{{Option: "-qmp", Path: sock, Server: true, Socket: sock}}}
	_, err = Dial(context.Background(), vm)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Dial(silent) = %v", err)
	}
	if d := time.Since(start); d < GreetingTimeout || d > GreetingTimeout+time.Second {
		t.Errorf("Dial took %v, want about %v", d, GreetingTimeout)
	}
}

// TestDialNoReachableMonitor: libvirt's monitor alone is ErrConflict
// pointing to libvirt; none at all is ErrNotAvailable naming -qmp.
func TestDialNoReachableMonitor(t *testing.T) {
	ctx := context.Background()
	c, _ := ParseCmdline(argsFile(t, "testdata/libvirt-boot-network.x86_64-latest.args"))
	_, err := Dial(ctx, VM{PID: 1, Name: c.Name, Monitors: c.Monitors})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "virsh attach-device") || !strings.Contains(err.Error(), "netctl hook") {
		t.Errorf("libvirt VM: %v", err)
	}
	_, err = Dial(ctx, VM{PID: 1, Name: "x"})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "-qmp unix:") {
		t.Errorf("no monitor: %v", err)
	}
	_, err = Dial(ctx, VM{PID: 1, Name: "x", Monitors: []Monitor{{Option: "-qmp", Unusable: "tcp monitor: fds can be passed only over a unix socket"}}})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "tcp monitor") {
		t.Errorf("tcp monitor only: %v", err)
	}
}

// TestDialUnixLongPath: a socket path longer than sun_path (as a path
// under /proc/PID/root/... can be) is reached through its directory's
// O_PATH fd.
func TestDialUnixLongPath(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(deep, "qmp.sock")
	if len(sock) <= 108 {
		t.Fatalf("path of %d bytes is not too long", len(sock))
	}
	d, err := os.Open(deep)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/qmp.sock", d.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := testenv.OpenFDs(t)
	c, err := dialUnix(context.Background(), sock)
	if err != nil {
		t.Fatalf("dialUnix(%d-byte path): %v", len(sock), err)
	}
	c.Close()
	if after := testenv.OpenFDs(t); after != before {
		t.Errorf("open fds %d -> %d", before, after)
	}
}
