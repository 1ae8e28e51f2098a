package main

import "testing"

// TestVersionFlag: netctl --version prints what netctl version does.
func TestVersionFlag(t *testing.T) {
	flag, cmd := run(t, "--version"), run(t, "version")
	if flag != cmd {
		t.Errorf("netctl --version printed %q, netctl version %q", flag, cmd)
	}
}
