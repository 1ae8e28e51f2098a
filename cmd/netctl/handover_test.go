package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// resetHandOver clears what handOver looks at, for this test and after it.
func resetHandOver(t *testing.T) {
	outputWritten.Store(false)
	stdinRead.Store(false)
	t.Cleanup(func() {
		outputWritten.Store(false)
		stdinRead.Store(false)
	})
}

// TestHandOver: the split netctl runs netctl-full in its place only while
// nothing has reached stdout or stderr (runApp's writers) and nothing was
// read from stdin; otherwise it runs nothing and says it is a netctl bug
// and to run netctl-full.
func TestHandOver(t *testing.T) {
	errExec := errors.New("exec ran")
	ran := 0
	fake := func() error { ran++; return errExec }

	resetHandOver(t)
	if err := handOver(fake); !errors.Is(err, errExec) || ran != 1 {
		t.Fatalf("handOver with nothing written or read: %v (exec ran %d times)", err, ran)
	}

	// Output through the writers runApp puts around the command.
	var out bytes.Buffer
	w := &safeWriter{w: &out, wrote: &outputWritten}
	if _, err := w.Write(nil); err != nil || outputWritten.Load() {
		t.Fatalf("an empty write counted as output (%v)", err)
	}
	io.WriteString(w, "NIC  BACKEND\n")
	ran = 0
	err := handOver(fake)
	if ran != 0 || err == nil || !strings.Contains(err.Error(), "netctl bug") || !strings.Contains(err.Error(), "had written output") ||
		!strings.Contains(err.Error(), "run netctl-full with the same arguments") {
		t.Errorf("handOver after output: %v (exec ran %d times)", err, ran)
	}

	// stdin read.
	resetHandOver(t)
	stdin.Read(make([]byte, 1))
	err = handOver(fake)
	if ran != 0 || err == nil || !strings.Contains(err.Error(), "netctl bug") || !strings.Contains(err.Error(), "had read stdin") {
		t.Errorf("handOver after reading stdin: %v (exec ran %d times)", err, ran)
	}
}

// TestRunAppTracksOutput: what a command prints through runApp's writers,
// stdout or stderr, is what handOver sees.
func TestRunAppTracksOutput(t *testing.T) {
	for _, args := range [][]string{{"netctl", "version"}, {"netctl", "no-such-command"}} {
		resetHandOver(t)
		var out, errb bytes.Buffer
		runApp(newApp(), args, &out, &errb)
		if out.Len()+errb.Len() == 0 {
			t.Fatalf("%v printed nothing", args)
		}
		if !outputWritten.Load() {
			t.Errorf("%v printed %q %q, not recorded", args, out.String(), errb.String())
		}
	}
}
