package main

import (
	"os"
	"strings"
	"testing"
)

// a test binary that dies while parallel tests are paused (they
// ran up to t.Parallel and were waiting for the serial tests to end)
// must not blame them: they never resumed, so they did not end "mid-test".
// Real go test -json output of a package whose serial subtest was killed
// by SIGKILL (go1.26), with TestP1 and TestP2 paused.
func TestUnfinishedPausedNotBlamed(t *testing.T) {
	events := `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestP1"}
{"Action":"output","Package":"example.com/m/p","Test":"TestP1","Output":"=== RUN   TestP1\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestP1","Output":"=== PAUSE TestP1\n"}
{"Action":"pause","Package":"example.com/m/p","Test":"TestP1"}
{"Action":"run","Package":"example.com/m/p","Test":"TestP2"}
{"Action":"output","Package":"example.com/m/p","Test":"TestP2","Output":"=== RUN   TestP2\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestP2","Output":"=== PAUSE TestP2\n"}
{"Action":"pause","Package":"example.com/m/p","Test":"TestP2"}
{"Action":"run","Package":"example.com/m/p","Test":"TestParent"}
{"Action":"output","Package":"example.com/m/p","Test":"TestParent","Output":"=== RUN   TestParent\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestParent/sub"}
{"Action":"output","Package":"example.com/m/p","Test":"TestParent/sub","Output":"=== RUN   TestParent/sub\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestParent/sub","Output":"    a_test.go:25: sub about to die\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestParent/sub","Output":"signal: killed\n"}
{"Action":"output","Package":"example.com/m/p","Output":"FAIL\texample.com/m/p\t0.016s\n"}
{"Action":"fail","Package":"example.com/m/p","Elapsed":0.019}
`
	ok, out := check(t, fakeModule(t, "TestP1(t *testing.T) {}", "TestP2(t *testing.T) {}", "TestParent(t *testing.T) {}"), "", "", "", events)
	if ok {
		t.Fatalf("passed:\n%s", out)
	}
	if !strings.Contains(out, "TestParent/sub did not finish") {
		t.Errorf("the test that was running is not named:\n%s", out)
	}
	for _, paused := range []string{"TestP1 did not finish", "TestP2 did not finish"} {
		if strings.Contains(out, paused) {
			t.Errorf("a paused test that never resumed is blamed (%q):\n%s", paused, out)
		}
	}
}

// a package that fails with no test failed or unfinished (the VM
// froze, or netctl-vm failed, after the last test ended or before the
// first began: netctl-vm's message is package-level output) gets no
// "testcheck: FAIL:" line in the summary, where the others' failures are
// listed: the end of the log shows nothing for it, the symptom this commit
// set out to fix ("CI showed only 'FAIL vhostnet 11.185s'").
func TestPackageOnlyFailureInSummary(t *testing.T) {
	events := `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMA"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"=== RUN   TestVMA\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"--- PASS: TestVMA (1.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestVMA","Elapsed":1}
{"Action":"output","Package":"example.com/m/p","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/p","Output":"netctl-vm: the guest froze: no heartbeat for 3m0s\n"}
{"Action":"output","Package":"example.com/m/p","Output":"FAIL\texample.com/m/p\t190.1s\n"}
{"Action":"fail","Package":"example.com/m/p","Elapsed":190.1}
`
	ok, out := check(t, fakeModule(t, "TestVMA(t *testing.T) {}"), "^TestVM", "", "", events)
	if ok {
		t.Fatalf("passed:\n%s", out)
	}
	if !strings.Contains(out, "testcheck: FAIL: example.com/m/p") {
		t.Errorf("the failed package is not in the summary:\n%s", out)
	}
}

// netctl-vm exec runs a package again in a new VM when the first froze:
// the package then passes, and the summary says it froze once.
func TestFrozeAgainNoted(t *testing.T) {
	events := `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMA"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"=== RUN   TestVMA\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"netctl-vm: the guest froze; running the test binary again in a new VM (once; a second freeze fails the run). The first run:\n"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMA"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"=== RUN   TestVMA\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"--- PASS: TestVMA (1.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestVMA","Elapsed":1}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t190.1s\n"}
{"Action":"pass","Package":"example.com/m/p","Elapsed":190.1}
`
	ok, out := check(t, fakeModule(t, "TestVMA(t *testing.T) {}"), "^TestVM", "", "", events)
	if !ok {
		t.Fatalf("failed:\n%s", out)
	}
	if !strings.Contains(out, "testcheck: note: example.com/m/p: its VM froze") {
		t.Errorf("the freeze is not noted:\n%s", out)
	}
}

// testcheck's frozeAgain must start the line netctl-vm exec prints.
func TestFrozeAgainMatchesNetctlVM(t *testing.T) {
	b, err := os.ReadFile("../netctl-vm/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `const frozeAgain = "`+frozeAgain) {
		t.Errorf("test/cmd/netctl-vm/main.go has no frozeAgain starting %q", frozeAgain)
	}
}
