package main

import (
	"strings"
	"testing"
)

// netctl-vm exec runs a frozen package again. The
// event streams below are real go1.26 `go test -json` output of a test
// binary run twice by an -exec script that prints netctl-vm's retry line
// on stderr in between (as runAgainIfFrozen does), Time/Elapsed removed.

// run 1 froze in TestB/s2 after it had logged an error and had written a
// line without its newline (a subprocess's progress, fmt.Print): test2json
// joins netctl-vm's retry line onto it, so it no longer starts the output
// event and the package's freeze is not noted.
func TestFrozeAgainNotedAfterPartialLine(t *testing.T) {
	events := `{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"partial progress...netctl-vm: the guest froze; running the test binary again in a new VM (once; a second freeze fails the run). The first run:\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"vm: the guest froze: no heartbeat for 3m0s\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"--- PASS: TestB/s2 (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"--- PASS: TestB (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t2.029s\n"}
{"Action":"pass","Package":"example.com/m/p"}
`
	_, out := check(t, fakeModule(t, "TestB(t *testing.T) {}"), "", "", "", events)
	if !strings.Contains(out, "testcheck: note: example.com/m/p: its VM froze") {
		t.Errorf("the freeze is not noted when the retry line follows a partial line:\n%s", out)
	}
}

// run 1 froze in TestB/s2 after it logged an error (t.Errorf: the test had
// failed, but its "--- FAIL" line never came); run 2 passed. The package
// is "ok" and testcheck passes with a note that does not say which test
// the VM froze in nor what it had logged: the first run's error is gone.
func TestFrozeAgainKeepsWhereAndWhat(t *testing.T) {
	events := `{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"    p_test.go:24: s2 saw a bad state in run 1\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"netctl-vm: the guest froze; running the test binary again in a new VM (once; a second freeze fails the run). The first run:\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"vm: the guest froze: no heartbeat for 3m0s\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"--- PASS: TestB/s2 (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"--- PASS: TestB (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t2.029s\n"}
{"Action":"pass","Package":"example.com/m/p"}
`
	_, out := check(t, fakeModule(t, "TestB(t *testing.T) {}"), "", "", "", events)
	if !strings.Contains(out, "TestB/s2") {
		t.Errorf("the summary does not name the test the first run froze in:\n%s", out)
	}
	if !strings.Contains(out, "s2 saw a bad state in run 1") {
		t.Errorf("the first run's error line, logged before the freeze, is dropped:\n%s", out)
	}
}

// Both runs froze in TestB/s2: p.started holds every test twice, so
// unfinished() blames TestB/s2 twice and prints TestB's and TestB/s2's
// output twice.
func TestSecondFreezeBlamedOnce(t *testing.T) {
	events := `{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"netctl-vm: the guest froze; running the test binary again in a new VM (once; a second freeze fails the run). The first run:\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/s2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"=== RUN   TestB/s2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestB/s2","Output":"netctl-vm: vm: the guest froze: no heartbeat for 3m0s\n"}
{"Action":"output","Package":"example.com/m/p","Output":"FAIL\texample.com/m/p\t4.027s\n"}
{"Action":"fail","Package":"example.com/m/p"}
`
	ok, out := check(t, fakeModule(t, "TestB(t *testing.T) {}"), "", "", "", events)
	if ok {
		t.Fatalf("passed:\n%s", out)
	}
	if n := strings.Count(out, "testcheck: FAIL: example.com/m/p TestB/s2 did not finish"); n != 1 {
		t.Errorf("TestB/s2 blamed %d times, want once:\n%s", n, out)
	}
}
