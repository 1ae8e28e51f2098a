package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/test/vm"
)

func TestPackageOptions(t *testing.T) {
	dir := t.TempDir()
	smp, mem, timeout := 1, 0, 11*time.Minute
	var pre []string
	retry := false
	if err := packageOptions(dir, &smp, &mem, &timeout, &pre, &retry); err != nil || smp != 1 || mem != 0 || timeout != 11*time.Minute || retry {
		t.Fatalf("no file: %d %d %v %v, want the defaults unchanged", smp, mem, timeout, err)
	}
	os.Mkdir(filepath.Join(dir, "testdata"), 0o755)
	conf := filepath.Join(dir, "testdata", "netctl-vm.conf")
	os.WriteFile(conf, []byte("# nested guest\nsmp=2\n\nmem=2048\ntimeout=15m\npreload=kvm_amd\nretry=frozen\n"), 0o644)
	if err := packageOptions(dir, &smp, &mem, &timeout, &pre, &retry); err != nil || smp != 2 || mem != 2048 || timeout != 15*time.Minute || len(pre) != 1 || pre[0] != "kvm_amd" || !retry {
		t.Fatalf("got %d %d %v %v %v %v, want 2 2048 15m [kvm_amd] retry", smp, mem, timeout, pre, retry, err)
	}
	// timeout only lengthens: go test's own -test.timeout stays if longer.
	timeout = time.Hour
	packageOptions(dir, &smp, &mem, &timeout, &pre, &retry)
	if timeout != time.Hour {
		t.Errorf("timeout shortened to %v", timeout)
	}
	for body, want := range map[string]string{
		"smp=0":        "smp 1-8",
		"mem=64":       "256-8192",
		"smp=two":      "wants a number",
		"timeout=-1s":  "duration",
		"cpus=2":       "unknown key",
		"mem=99999999": "256-8192",
		"smp=2\nmem=1": "256-8192",
		"preload=../x": "module names",
		"preload=a,,b": "module names",
		// strict, as TestKVMPackagesHaveTwoVCPUs (test/l2) reads it
		"smp=2 # nested": "wants a number",
		"timeout=abc":    `"abc"`,
		"retry=always":   "retry knows only frozen",
	} {
		os.WriteFile(conf, []byte(body+"\n"), 0o644)
		s, m, d := 1, 0, time.Minute
		var pr []string
		err := packageOptions(dir, &s, &m, &d, &pr, new(bool))
		if err == nil || !strings.Contains(err.Error(), want) || s != 1 || m != 0 || d != time.Minute || pr != nil {
			t.Errorf("%q: %v (smp %d mem %d timeout %v), want an error naming %q and nothing changed", body, err, s, m, d, want)
		}
	}
}

// A test binary that dies in the VM without a word (killed by a signal,
// the OOM killer, a Go runtime abort whose output was lost) must leave a
// line in go test's output saying so, with the guest console's last lines:
// CI once showed only "FAIL pkg 11.185s".
func TestExitReport(t *testing.T) {
	if s := exitReport("6.1", &vm.Result{ExitCode: 0}); s != "" {
		t.Errorf("exit 0 reported: %q", s)
	}
	// A test failure (exit 1) speaks for itself: one line, no console.
	s := exitReport("6.1", &vm.Result{ExitCode: 1, Wall: 3 * time.Second, Console: "boot\n"})
	if !strings.Contains(s, "exit 1") || strings.Contains(s, "boot") {
		t.Errorf("exit 1: %q", s)
	}
	console := "early boot\n" + strings.Repeat("noise\n", 30) + "Out of memory: Killed process 77 (vhostnet.test)\n"
	s = exitReport("6.1", &vm.Result{ExitCode: 137, Wall: 11 * time.Second, Console: console})
	for _, want := range []string{"kernel 6.1", "exit 137", "signal 9 (killed)", "Out of memory: Killed process 77"} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "early boot") {
		t.Errorf("the whole console printed:\n%s", s)
	}
}

// A VM that froze (no heartbeat) runs the test binary again once, within
// what is left of the timeout, if the package asks (retry=frozen); a second
// freeze, any other error, or too little time left is returned as it is.
func TestRunAgainIfFrozen(t *testing.T) {
	frozen := &vm.FrozenError{After: 3 * time.Minute, LastBeat: "99.16"}
	type call struct {
		left  time.Duration
		again bool
	}
	seq := func(errs ...error) (func(time.Duration, bool) (*vm.Result, error), *[]call) {
		var calls []call
		return func(left time.Duration, again bool) (*vm.Result, error) {
			err := errs[len(calls)]
			calls = append(calls, call{left, again})
			return &vm.Result{}, err
		}, &calls
	}
	spent := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	var w strings.Builder
	run, calls := seq(frozen, nil)
	if res, err := runAgainIfFrozen(run, 31*time.Minute, true, spent(4*time.Minute), &w); err != nil || res.ExitCode != 0 ||
		len(*calls) != 2 || (*calls)[0] != (call{31 * time.Minute, false}) || (*calls)[1] != (call{27 * time.Minute, true}) {
		t.Errorf("frozen then fine: %v %v, calls %v", res, err, *calls)
	}
	if !strings.HasPrefix(w.String(), "\n"+frozeAgain) || !strings.Contains(w.String(), "99.16") {
		t.Errorf("the retry is not said on a line of its own: %q", w.String())
	}
	w.Reset()
	run, calls = seq(frozen, frozen)
	if _, err := runAgainIfFrozen(run, 31*time.Minute, true, spent(4*time.Minute), &w); !errors.As(err, new(*vm.FrozenError)) || len(*calls) != 2 {
		t.Errorf("frozen twice: %v, calls %v", err, *calls)
	}
	// Not asked for: a freeze may be the code's own lockup.
	w.Reset()
	run, calls = seq(frozen, nil)
	if _, err := runAgainIfFrozen(run, 31*time.Minute, false, spent(4*time.Minute), &w); !errors.As(err, new(*vm.FrozenError)) || len(*calls) != 1 || w.Len() != 0 {
		t.Errorf("retry off: %v, calls %v, %q", err, *calls, w.String())
	}
	// Too little left: go test would kill netctl-vm before a second run ends.
	w.Reset()
	run, calls = seq(frozen, nil)
	if _, err := runAgainIfFrozen(run, 31*time.Minute, true, spent(29*time.Minute), &w); !errors.As(err, new(*vm.FrozenError)) || len(*calls) != 1 ||
		!strings.Contains(w.String(), "not running it again") {
		t.Errorf("2 minutes left: %v, calls %v, %q", err, *calls, w.String())
	}
	w.Reset()
	to := &vm.TimeoutError{After: time.Minute}
	run, calls = seq(to, nil)
	if _, err := runAgainIfFrozen(run, 31*time.Minute, true, spent(time.Minute), &w); err != to || len(*calls) != 1 || w.Len() != 0 {
		t.Errorf("a timeout was run again: %v, calls %v, %q", err, *calls, w.String())
	}
}
