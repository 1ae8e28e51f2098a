package vm

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWatchBeatFiresWhenTheBeatStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "beat.log")
	frozen := make(chan time.Duration, 1)
	stop := make(chan struct{})
	defer close(stop)
	go watchBeat(path, 300*time.Millisecond, 20*time.Millisecond, frozen, stop)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Beats every 100 ms for a second: more than three times after, no freeze.
	for i := range 10 {
		f.WriteString("1." + string(rune('0'+i)) + "\n")
		select {
		case d := <-frozen:
			t.Fatalf("frozen after %s while the guest was beating", d)
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case d := <-frozen:
		if d < 300*time.Millisecond {
			t.Errorf("frozen after %s, want at least 300ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the beat stopped and no freeze was reported in 5 s")
	}
	if got := lastBeat(path); got != "1.9" {
		t.Errorf("lastBeat %q, want 1.9", got)
	}
}

func TestWatchBeatNoFileIsAFreeze(t *testing.T) {
	frozen := make(chan time.Duration, 1)
	stop := make(chan struct{})
	defer close(stop)
	go watchBeat(filepath.Join(t.TempDir(), "none"), 100*time.Millisecond, 10*time.Millisecond, frozen, stop)
	select {
	case <-frozen:
	case <-time.After(5 * time.Second):
		t.Fatal("no beat file and no freeze reported")
	}
	if got := lastBeat(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Errorf("lastBeat of no file: %q", got)
	}
}

func TestFrozenErrorSaysWhatToDo(t *testing.T) {
	for _, e := range []*FrozenError{{After: 3 * time.Minute}, {After: 3 * time.Minute, LastBeat: "61.20"}} {
		msg := e.Error()
		if !strings.Contains(msg, "no heartbeat for 3m0s") || !strings.Contains(msg, "smp=2") {
			t.Errorf("%q", msg)
		}
		if e.LastBeat != "" && !strings.Contains(msg, "61.20 s of guest uptime") {
			t.Errorf("%q does not give the last beat", msg)
		}
	}
}

// A VM whose vCPUs never run (QEMU's -S: stopped at start) is reported as
// frozen after FreezeAfter, not after its timeout.
func TestHarnessReportsFreeze(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.1")
	res, err := img.Run(t.Context(), RunOptions{Script: "exit 0", Timeout: 2 * time.Minute, FreezeAfter: 10 * time.Second,
		QEMUArgs: []string{"-S"}, Stdout: io.Discard})
	var fe *FrozenError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *FrozenError", err)
	}
	if res.Wall > 40*time.Second {
		t.Errorf("a 10 s freeze watchdog took %s", res.Wall)
	}
	if fe.LastBeat != "" || !strings.Contains(err.Error(), "no beat at all") {
		t.Errorf("error %q, last beat %q", err, fe.LastBeat)
	}
}

// A guest whose init keeps beating is not frozen, even while its command
// is silent for longer than FreezeAfter.
func TestHarnessBeatKeepsASilentGuestAlive(t *testing.T) {
	t.Parallel()
	img := selfTestImage(t, "6.12")
	res, err := img.Run(t.Context(), RunOptions{Script: "sleep 25; exit 7", Timeout: 2 * time.Minute, FreezeAfter: 15 * time.Second, Stdout: io.Discard})
	if err != nil {
		t.Fatalf("a silent but beating guest: %v", err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit %d, want 7", res.ExitCode)
	}
}
