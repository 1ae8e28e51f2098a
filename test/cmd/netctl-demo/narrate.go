package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// narrator prints the demo as a reader follows it: section headings with
// the time since the start, each command as a user would type it ("$ ..."
// on the host, "guest# ..." in the guest, "(qmp) ..." on QEMU's monitor)
// and that command's real output. Safe for concurrent use (mu guards the
// writer and the section count).
type narrator struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	section int
	clock   string // names the heading's clock when it is not the whole demo's (the VM half keeps its own)
}

func newNarrator(w io.Writer) *narrator { return &narrator{w: w, start: time.Now()} }

// heading starts a numbered section.
func (n *narrator) heading(format string, a ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.section++
	fmt.Fprintf(n.w, "\n== %d. %s   [%s%.1f s]\n", n.section, fmt.Sprintf(format, a...), n.clock, time.Since(n.start).Seconds())
}

// note prints an explanation, as a shell comment.
func (n *narrator) note(format string, a ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range strings.Split(fmt.Sprintf(format, a...), "\n") {
		fmt.Fprintf(n.w, "# %s\n", l)
	}
}

// shown prints a prompt line and output that the demo produced itself
// (a guest command, a QMP command).
func (n *narrator) shown(prompt, cmd, out string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "%s %s\n", prompt, cmd)
	n.output(out)
}

// output prints out, ending it with a newline (mu held).
func (n *narrator) output(out string) {
	if out == "" {
		return
	}
	io.WriteString(n.w, out)
	if !strings.HasSuffix(out, "\n") {
		io.WriteString(n.w, "\n")
	}
}

// command is one host command: what the user types (Show) and what runs
// (Argv: the same words, with the binaries' real paths).
type command struct {
	Show string
	Argv []string
	Env  []string // added to the demo's environment
}

// run prints c, runs it, prints its output (stdout and stderr together,
// as a terminal shows them) and, when it fails, its exit status. The
// error says which command failed and how.
func (n *narrator) run(ctx context.Context, c command) (string, error) {
	n.mu.Lock()
	fmt.Fprintf(n.w, "$ %s\n", c.Show)
	n.mu.Unlock()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	if len(c.Env) > 0 {
		cmd.Env = append(cmd.Environ(), c.Env...)
	}
	out := &cappedBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.output(out.String())
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			fmt.Fprintf(n.w, "(exit status %d)\n", ee.ExitCode())
		}
		return out.String(), fmt.Errorf("%s: %w", c.Show, err)
	}
	return out.String(), nil
}

// runWant is run, and fails with the error missing when c's output does
// not contain want.
func (n *narrator) runWant(ctx context.Context, c command, want, missing string) (string, error) {
	out, err := n.run(ctx, c)
	if err != nil {
		return out, err
	}
	if !strings.Contains(out, want) {
		return out, errors.New(missing)
	}
	return out, nil
}

// maxOutput bounds what the demo keeps of one command's output: the
// commands are its own, but a runaway one must not fill its memory.
const maxOutput = 1 << 20

// cappedBuffer keeps the first max bytes written to it and counts the
// rest. Not safe for concurrent use; os/exec calls Write from one
// goroutine at a time when Stdout and Stderr are the same writer.
type cappedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		c.dropped += len(p) - room
		c.buf.Write(p[:room])
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *cappedBuffer) String() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n[%d more bytes of output not kept]\n", c.dropped)
	}
	return c.buf.String()
}

// exitCode is the exit status in err from run, or -1 when the command
// did not run to an exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
