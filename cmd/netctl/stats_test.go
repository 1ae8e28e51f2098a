package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/qemuproc"
	"github.com/netctl/netctl/stats"
)

// TestStatsBadInput: every mistake is one line that says what to do, with
// the exit code exitcode.go gives it; nothing is sampled.
func TestStatsBadInput(t *testing.T) {
	t.Setenv("NETCTL_RUN_DIR", t.TempDir())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--interval", "10ms"}, 2, "--interval 10ms: out of range: use 100ms to 1h0m0s"},
		{[]string{"--interval", "2h"}, 2, "out of range"},
		{[]string{"--interval", "soon"}, 2, "invalid value"},
		{[]string{"--vm", "a", "--qmp", "/x"}, 2, "give --vm NAME or --qmp SOCKET, not both"},
		{[]string{"--id", "0bad"}, 2, `--id "0bad"`},
		{[]string{"--vm", "nctl-no-such-vm"}, 1, `no VM named "nctl-no-such-vm"`},
		{[]string{"--qmp", "/nonexistent/qmp.sock"}, 2, "/nonexistent/qmp.sock"},
		{[]string{}, 1, "no NICs: netctl's state has no NICs (netctl list shows them): attach one, or name a VM with --vm NAME or --qmp SOCKET"},
		{[]string{"--id", "net9"}, 1, `no NIC "net9"`},
		{[]string{"extra"}, 2, "takes no arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := runMain(append([]string{"netctl", "stats"}, c.args...), &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("netctl stats %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
		if c.code == 1 && strings.Contains(c.want, "no VM") && !strings.Contains(stderr.String(), "netctl vm list") {
			t.Errorf("netctl stats %q: no hint: %q", c.args, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("netctl stats %q printed %q", c.args, stdout.String())
		}
	}
}

// TestStatsWatchGone: a NIC that stops being listed (detached) is "gone"
// from then on while the other keeps its rates. The targets are the
// loopback link (readable without privilege), so the link source answers.
func TestStatsWatchGone(t *testing.T) {
	ts := []stats.Target{
		{VM: "web1", NIC: "net1", Link: "lo", Backend: "userspace", QueuePairs: 1},
		{VM: "web1", NIC: "net2", Link: "lo", Backend: "userspace", QueuePairs: 1},
	}
	w, samples := watchRounds(t, 4, func(round int) ([]stats.Target, error) {
		if round >= 3 { // detached after the second interval
			return ts[:1], nil
		}
		return ts, nil
	})
	for i, s := range samples {
		if len(s.NICs) != 2 || s.NICs[0].NIC != "net1" || s.NICs[1].NIC != "net2" {
			t.Fatalf("line %d: NICs %+v", i, s.NICs)
		}
		if s.NICs[0].State != stateUp || s.NICs[0].RX == nil {
			t.Errorf("line %d: net1 %+v, want up with link rates", i, s.NICs[0])
		}
		want := stateUp
		if i >= 1 { // listed in rounds 1 and 2 (lines 0), gone from round 3 (line 1) on
			want = stateGone
		}
		if s.NICs[1].State != want {
			t.Errorf("line %d: net2 is %q, want %q", i, s.NICs[1].State, want)
		}
	}
	var tbl bytes.Buffer
	w.json = false
	w.out = &tbl
	w.print(w.view(map[string]stats.NICStats{}, time.Second, time.Now()))
	if !strings.Contains(tbl.String(), "web1/net2       gone: detached, or its VM exited") {
		t.Errorf("table:\n%s", tbl.String())
	}
}

// TestStatsWatchListFails: a listing that fails for a moment (the VM's
// monitor busy: another client holds it) does not make the NICs listed
// before gone while their QEMU still runs (same pid and start time):
// they keep their rows and rates (the link needs no QMP), the sample
// says why the listing failed, and the rows go on when it works again.
func TestStatsWatchListFails(t *testing.T) {
	start, err := qemuproc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ts := []stats.Target{{VM: "web1", NIC: "net1", Link: "lo", Backend: "userspace", QueuePairs: 1, PID: os.Getpid(), PIDStart: start}}
	_, samples := watchRounds(t, 3, func(round int) ([]stats.Target, error) {
		if round == 3 {
			return nil, errors.New("qemuproc: VM web1: every QMP monitor is in use: busy")
		}
		return ts, nil
	})
	for i, s := range samples {
		if len(s.NICs) != 1 || s.NICs[0].State != stateUp || s.NICs[0].RX == nil {
			t.Errorf("line %d: %+v, want net1 up with link rates", i, s.NICs)
		}
		if busy := strings.Contains(s.ListError, "in use"); busy != (i == 1) { // round 3 is line 1
			t.Errorf("line %d: list error %q", i, s.ListError)
		}
	}
}

// watchRounds runs a --json statsWatch at a 100 ms interval whose lister
// answers list(round) (rounds count from 1; list gets its own copy of the
// targets to return) until the fifth listing, and returns the watch and
// the samples it printed, at least min of them.
func watchRounds(t *testing.T, min int, list func(round int) ([]stats.Target, error)) (*statsWatch, []statsSample) {
	t.Helper()
	var mu sync.Mutex // guards rounds
	rounds := 0
	var out bytes.Buffer
	w := &statsWatch{interval: 100 * time.Millisecond, json: true, out: &out, col: stats.NewCollector(stats.Options{}),
		lister: func(context.Context) ([]stats.Target, error) {
			mu.Lock()
			defer mu.Unlock()
			rounds++
			ts, err := list(rounds)
			return append([]stats.Target(nil), ts...), err
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, true) }()
	for {
		mu.Lock()
		r := rounds
		mu.Unlock()
		if r >= 5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < min {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	samples := make([]statsSample, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &samples[i]); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	return w, samples
}

// TestStatsSampleDeadline: each sample's listing and collection run
// under a deadline (a VM whose monitor never answers would otherwise
// stop netctl stats for good), the listing within half of it.
func TestStatsSampleDeadline(t *testing.T) {
	var mu sync.Mutex
	var deadlines []time.Duration
	w := &statsWatch{interval: 100 * time.Millisecond, json: true, out: io.Discard, col: stats.NewCollector(stats.Options{}),
		lister: func(ctx context.Context) ([]stats.Target, error) {
			mu.Lock()
			defer mu.Unlock()
			if dl, ok := ctx.Deadline(); ok {
				deadlines = append(deadlines, time.Until(dl))
			} else {
				deadlines = append(deadlines, -1)
			}
			return []stats.Target{{VM: "web1", NIC: "net1", Link: "lo", Backend: "userspace", QueuePairs: 1}}, nil
		}}
	if err := w.run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) != 2 {
		t.Fatalf("%d listings, want 2", len(deadlines))
	}
	for i, d := range deadlines {
		if d < 0 || d > sampleTimeout(w.interval)/2 {
			t.Errorf("listing %d: deadline in %v, want one within %v", i, d, sampleTimeout(w.interval)/2)
		}
	}
}

// forgetRecorder is a real Collector that records what it is told to
// forget.
type forgetRecorder struct {
	*stats.Collector
	mu     sync.Mutex // guards forgot
	forgot []string   // Target.Key() of each Forget
}

func (r *forgetRecorder) Forget(t stats.Target) {
	r.mu.Lock()
	r.forgot = append(r.forgot, t.Key())
	r.mu.Unlock()
	r.Collector.Forget(t)
}

// TestStatsWatchVMRestarted: a VM that restarts under the same name (the
// same VM and NIC id, another QEMU: pid and start time) is another
// target. The watch drops what the Collector kept of the old one (its
// ring state was never forgotten before: the key it is listed under did
// not change) and its last sample, so the NIC starts over ("first
// sampled") instead of showing a rate across two processes.
func TestStatsWatchVMRestarted(t *testing.T) {
	start, err := qemuproc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	childStart, err := qemuproc.StartTime(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	before := stats.Target{VM: "web1", NIC: "net1", Link: "lo", Backend: "userspace", QueuePairs: 1, PID: os.Getpid(), PIDStart: start}
	after := before
	after.PID, after.PIDStart = child.Process.Pid, childStart
	cur := before
	rec := &forgetRecorder{Collector: stats.NewCollector(stats.Options{})}
	w := &statsWatch{interval: time.Second, col: rec,
		seen: map[string]stats.Target{}, prev: map[string]stats.NICStats{}, gone: map[string]bool{},
		lister: func(context.Context) ([]stats.Target, error) { return []stats.Target{cur}, nil }}
	ctx := context.Background()
	sample := func() statsSample {
		c, err := w.sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w.view(c, time.Second, time.Now())
	}
	sample()
	if s := sample(); len(s.NICs) != 1 || s.NICs[0].RX == nil {
		t.Fatalf("the same QEMU twice: %+v, want link rates", s.NICs)
	}
	if len(rec.forgot) != 0 {
		t.Fatalf("forgot %q while the VM ran on", rec.forgot)
	}
	cur = after // the VM restarted under its name
	s := sample()
	if len(rec.forgot) != 1 || rec.forgot[0] != before.Key() {
		t.Errorf("forgot %q, want the old QEMU's target %q", rec.forgot, before.Key())
	}
	if len(s.NICs) != 1 || s.NICs[0].State == stateGone || s.NICs[0].RX != nil || !strings.Contains(s.NICs[0].Missing["sample"], "first sampled") {
		t.Errorf("after the restart: %+v, want the NIC to start over (first sampled, no rate across two QEMUs)", s.NICs)
	}
	if s := sample(); len(s.NICs) != 1 || s.NICs[0].RX == nil || len(rec.forgot) != 1 {
		t.Errorf("the new QEMU twice: %+v (forgot %q), want link rates and nothing more forgotten", s.NICs, rec.forgot)
	}
}
