package qemuproc

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestPickPassesUntrusted: candidates that fail the trust check neither
// win nor make a name ambiguous, and the refusal names each and why.
func TestPickPassesUntrusted(t *testing.T) {
	vms := []VM{{PID: 10, Name: "web1"}, {PID: 11, Name: "web1"}, {PID: 12, Name: "db"}}
	untrusted := func(vm VM) error {
		if vm.PID == 11 || vm.PID == 12 {
			return &UntrustedError{PID: vm.PID, Why: "runs as uid 65534"}
		}
		return nil
	}
	if vm, err := pickTrusted(vms, "web1", untrusted); err != nil || vm.PID != 10 {
		t.Errorf("web1 with pid 11 untrusted: %+v, %v; want pid 10", vm, err)
	}
	_, err := pickTrusted(vms, "db", untrusted)
	if !errors.Is(err, ErrNoVM) || !strings.Contains(err.Error(), "passed by 1 process(es)") || !strings.Contains(err.Error(), "pid 12 runs as uid 65534") {
		t.Errorf("db, only untrusted: %v; want ErrNoVM naming pid 12 and why", err)
	}
}

// TestTrustChecksThisProcess: this test process runs as a trusted uid
// (root, or netctl's own) from a file its owner owns; a Trust without
// that uid refuses it, saying which uid.
func TestTrustChecksThisProcess(t *testing.T) {
	tr, err := DefaultTrust()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := StartTime(os.Getpid())
	if err := tr.Check(os.Getpid(), st); err != nil {
		t.Errorf("this process: %v", err)
	}
	err = Trust{UIDs: map[uint32]string{4242: "someone"}}.Check(os.Getpid(), st)
	var ue *UntrustedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrConflict) || !strings.Contains(ue.Why, "runs as uid") {
		t.Errorf("a Trust without this uid: %v", err)
	}
	if err := tr.Check(os.Getpid(), st+1); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("a wrong start time: %v", err)
	}
	t.Setenv(TrustedUsersEnv, "no-such-user-netctl")
	if _, err := DefaultTrust(); !errors.Is(err, ErrInvalid) {
		t.Errorf("%s naming no user: %v", TrustedUsersEnv, err)
	}
}
