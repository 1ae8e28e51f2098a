package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestVMListUnknownName: a name no QEMU has is exit 1 with the hint to
// run netctl vm list (not netctl probe); a flag after the names is a
// usage error.
func TestVMListUnknownName(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runMain([]string{"netctl", "vm", "list", "nctl-no-such-vm"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `no VM named "nctl-no-such-vm"`) || !strings.Contains(stderr.String(), "run 'netctl vm list'") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := runMain([]string{"netctl", "vm", "list", "x", "--json"}, &stdout, &stderr); code != 2 {
		t.Errorf("flag after the names: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := runMain([]string{"netctl", "vm", "list", "--timeout", "0s"}, &stdout, &stderr); code != 2 {
		t.Errorf("--timeout 0s: exit %d, stderr %q", code, stderr.String())
	}
}
