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
	if err := packageOptions(dir, &smp, &mem, &timeout, &pre); err != nil || smp != 1 || mem != 0 || timeout != 11*time.Minute {
		t.Fatalf("no file: %d %d %v %v, want the defaults unchanged", smp, mem, timeout, err)
	}
	os.Mkdir(filepath.Join(dir, "testdata"), 0o755)
	conf := filepath.Join(dir, "testdata", "netctl-vm.conf")
	os.WriteFile(conf, []byte("# nested guest\nsmp=2\n\nmem=2048\ntimeout=15m\npreload=kvm_amd\n"), 0o644)
	if err := packageOptions(dir, &smp, &mem, &timeout, &pre); err != nil || smp != 2 || mem != 2048 || timeout != 15*time.Minute || len(pre) != 1 || pre[0] != "kvm_amd" {
		t.Fatalf("got %d %d %v %v %v, want 2 2048 15m [kvm_amd]", smp, mem, timeout, pre, err)
	}
	// timeout only lengthens: go test's own -test.timeout stays if longer.
	timeout = time.Hour
	packageOptions(dir, &smp, &mem, &timeout, &pre)
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
	} {
		os.WriteFile(conf, []byte(body+"\n"), 0o644)
		s, m, d := 1, 0, time.Minute
		var pr []string
		err := packageOptions(dir, &s, &m, &d, &pr)
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

// A VM that froze (no heartbeat) runs the test binary again once, saying
// so; a second freeze and any other error are returned as they are.
func TestRunAgainIfFrozen(t *testing.T) {
	frozen := &vm.FrozenError{After: 3 * time.Minute, LastBeat: "99.16"}
	seq := func(errs ...error) (func() (*vm.Result, error), *int) {
		n := 0
		return func() (*vm.Result, error) {
			err := errs[n]
			n++
			if err != nil {
				return &vm.Result{}, err
			}
			return &vm.Result{ExitCode: 0}, nil
		}, &n
	}
	var w strings.Builder
	run, n := seq(frozen, nil)
	if res, err := runAgainIfFrozen(run, &w); err != nil || res.ExitCode != 0 || *n != 2 {
		t.Errorf("frozen then fine: %v %v, %d runs", res, err, *n)
	}
	if !strings.Contains(w.String(), frozeAgain) || !strings.Contains(w.String(), "99.16") {
		t.Errorf("the retry is not said: %q", w.String())
	}
	w.Reset()
	run, n = seq(frozen, frozen, nil)
	if _, err := runAgainIfFrozen(run, &w); !errors.As(err, new(*vm.FrozenError)) || *n != 2 {
		t.Errorf("frozen twice: %v, %d runs", err, *n)
	}
	w.Reset()
	to := &vm.TimeoutError{After: time.Minute}
	run, n = seq(to, nil)
	if _, err := runAgainIfFrozen(run, &w); err != to || *n != 1 || w.Len() != 0 {
		t.Errorf("a timeout was run again: %v, %d runs, %q", err, *n, w.String())
	}
}
