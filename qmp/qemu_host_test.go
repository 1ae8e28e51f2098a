package qmp

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netctl/netctl/internal/testenv"
)

// TestHostRealQEMU talks to a real QEMU (machine "none": no guest, starts
// at once): handshake, queries, an error, fd passing, quit.
func TestHostRealQEMU(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, c := startQEMU(t, ctx, "netctl-qmp-test")
	if c.Greeting.QMP.Version.QEMU.Major < 7 {
		t.Errorf("greeting %+v", c.Greeting.QMP.Version)
	}
	var name struct{ Name string }
	if err := c.Run(ctx, "query-name", nil, &name); err != nil || name.Name != "netctl-qmp-test" {
		t.Errorf("query-name: %+v, %v", name, err)
	}
	var qe *Error
	if _, err := c.Execute(ctx, "no-such-command", nil); !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Errorf("unknown command: %v", err)
	}
	if pid, err := c.PeerPID(); err != nil || pid != cmd.Process.Pid {
		t.Errorf("PeerPID = %d, %v; QEMU is %d", pid, err, cmd.Process.Pid)
	}
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	defer unix.Close(efd)
	if err := c.SendFD(ctx, "netctl-test-fd", efd); err != nil {
		t.Fatalf("getfd: %v", err)
	}
	if err := c.Run(ctx, "closefd", map[string]string{"fdname": "netctl-test-fd"}, nil); err != nil {
		t.Errorf("closefd of the passed fd: %v", err)
	}
	if err := c.Run(ctx, "closefd", map[string]string{"fdname": "netctl-test-fd"}, nil); err == nil {
		t.Error("closefd of an fd QEMU no longer has: no error")
	}
	c.Execute(ctx, "quit", nil)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("QEMU did not quit")
	}
}

// TestHostRealQEMUBatch: a real QEMU answers a pipelined batch in order,
// an error in the middle fails that command alone, and a batch larger
// than one write (maxBatchBytes) goes out in parts.
func TestHostRealQEMUBatch(t *testing.T) {
	testenv.Host(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, c := startQEMU(t, ctx, "netctl-batch")
	var v struct {
		QEMU struct{ Major int } `json:"qemu"`
	}
	var name struct{ Name string }
	var machine string
	errs := c.Batch(ctx, []Cmd{
		{Name: "query-version", Out: &v},
		{Name: "no-such-command"},
		{Name: "qom-get", Args: map[string]string{"path": "/machine", "property": "type"}, Out: &machine},
		{Name: "query-name", Out: &name},
	})
	var qe *Error
	if errs[0] != nil || !errors.As(errs[1], &qe) || qe.Class != "CommandNotFound" || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errs %v", errs)
	}
	if v.QEMU.Major < 7 || name.Name != "netctl-batch" || machine == "" {
		t.Errorf("answers: version %+v, name %q, machine %q", v, name.Name, machine)
	}
	// About 3 x maxBatchBytes of commands: several writes.
	n := 3 * maxBatchBytes / len(`{"execute":"query-name","id":1000}`+"\n")
	cmds := make([]Cmd, n)
	names := make([]struct{ Name string }, n)
	for i := range cmds {
		cmds[i] = Cmd{Name: "query-name", Out: &names[i]}
	}
	cmds[n/2] = Cmd{Name: "qom-get", Args: map[string]string{"path": "/nowhere", "property": "type"}}
	errs = c.Batch(ctx, cmds)
	for i, err := range errs {
		switch {
		case i == n/2:
			if err == nil {
				t.Errorf("qom-get /nowhere: no error")
			}
		case err != nil || names[i].Name != "netctl-batch":
			t.Fatalf("command %d of %d: %v, %q", i, n, err, names[i].Name)
		}
	}
	if err := c.Run(ctx, "query-name", nil, &name); err != nil {
		t.Errorf("after the batches: %v", err)
	}
}

// startQEMU starts a QEMU with no machine and only a QMP socket, named
// name, and connects to it; both go when the test ends.
func startQEMU(t *testing.T, ctx context.Context, name string) (*exec.Cmd, *Client) {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64: %v (make vm-deps installs it)", err)
	}
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	cmd := exec.Command(qemu, "-M", "none", "-nodefaults", "-display", "none", "-name", name,
		"-qmp", "unix:"+sock+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for {
		c, err := Dial(ctx, sock)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return cmd, c
		}
		if ctx.Err() != nil {
			t.Fatalf("QEMU's QMP socket never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
