package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUndoStackOrder: undos run newest first, every one even when some
// fail, and the error names each failed one; a second run does nothing.
func TestUndoStackOrder(t *testing.T) {
	var u undoStack
	var order []string
	for _, s := range []string{"namespace", "guest", "nic"} {
		u.push(s, func() error {
			order = append(order, s)
			if s == "guest" || s == "namespace" {
				return errors.New(s + " failed")
			}
			return nil
		})
	}
	err := u.run()
	if got := strings.Join(order, ","); got != "nic,guest,namespace" {
		t.Errorf("undo order %s, want nic,guest,namespace", got)
	}
	if err == nil || !strings.Contains(err.Error(), "undo guest: guest failed") || !strings.Contains(err.Error(), "undo namespace: namespace failed") {
		t.Errorf("error %v does not name both failed undos", err)
	}
	order = nil
	if err := u.run(); err != nil || len(order) != 0 {
		t.Errorf("second run: %v, ran %v", err, order)
	}
}

// TestNarratorRun: a command is shown as typed, its output (stdout and
// stderr) follows, and a failure shows the exit status and returns an
// error that names the command, with the status exitCode reads.
func TestNarratorRun(t *testing.T) {
	var b bytes.Buffer
	n := newNarrator(&b)
	n.heading("first")
	out, err := n.run(context.Background(), command{Show: "say hello", Argv: []string{"sh", "-c", "echo hello; echo oops >&2"}})
	if err != nil || out != "hello\noops\n" {
		t.Errorf("run: %q, %v", out, err)
	}
	_, err = n.run(context.Background(), command{Show: "fail", Argv: []string{"sh", "-c", "printf partial; exit 3"}})
	if err == nil || !strings.HasPrefix(err.Error(), "fail: ") || exitCode(err) != 3 {
		t.Errorf("failing command: %v (exit %d)", err, exitCode(err))
	}
	if exitCode(errors.New("no process")) != -1 {
		t.Errorf("exitCode of a non-exit error is not -1")
	}
	_, err = n.run(context.Background(), command{Show: "env", Argv: []string{"sh", "-c", "echo $NETCTL_DEMO_X"}, Env: []string{"NETCTL_DEMO_X=set"}})
	if err != nil {
		t.Fatal(err)
	}
	n.note("two\nlines")
	n.shown("guest#", "ls", "a\nb")
	want := "\n== 1. first   [0.0 s]\n$ say hello\nhello\noops\n$ fail\npartial\n(exit status 3)\n$ env\nset\n# two\n# lines\nguest# ls\na\nb\n"
	if got := b.String(); got != want {
		t.Errorf("narrative:\n%s\nwant:\n%s", got, want)
	}
}

// TestCommandShape: every host command runs in the demo's namespace
// with the demo's state directory, and shows as a user would type it.
func TestCommandShape(t *testing.T) {
	h := &hostHalf{cfg: defaultHostConfig(), run: "/tmp/x"}
	h.cfg.Netctl = "/abs/bin/netctl"
	c := h.netctl("attach", "--vm", "netctl-demo", "--id", "net1")
	if c.Show != "ip netns exec netctl-demo netctl attach --vm netctl-demo --id net1" {
		t.Errorf("shown as %q", c.Show)
	}
	if strings.Join(c.Argv, " ") != "ip netns exec netctl-demo /abs/bin/netctl attach --vm netctl-demo --id net1" {
		t.Errorf("runs %q", c.Argv)
	}
	if len(c.Env) != 1 || c.Env[0] != "NETCTL_RUN_DIR=/tmp/x" {
		t.Errorf("env %q", c.Env)
	}
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

// buildNetctl builds cmd/netctl from this tree into a temporary directory
// (the demo runs the real command).
func buildNetctl(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go" // where the Makefile finds it
	}
	out := filepath.Join(t.TempDir(), "netctl")
	cmd := exec.Command(gobin, "build", "-o", out, "./cmd/netctl")
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/netctl: %v\n%s", err, b)
	}
	return out
}

// TestCappedBuffer: output beyond the cap is counted, not kept.
func TestCappedBuffer(t *testing.T) {
	c := &cappedBuffer{max: 4}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := c.String(); got != "abcd\n[4 more bytes of output not kept]\n" {
		t.Errorf("got %q", got)
	}
}
