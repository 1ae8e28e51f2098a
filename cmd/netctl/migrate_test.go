package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateAndPlanFlagsRefuseBadFiles: a manifest or plan that is not
// one is a usage error naming the file and what to do; a file that is
// not there is a failure; nothing is asked of QEMU first.
func TestMigrateAndPlanFlagsRefuseBadFiles(t *testing.T) {
	bin := netctlBinary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema":1}`), 0o644)
	probe := "../../policy/testdata/probe-6.1.json"
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"migrate", "incoming", "--vm", "x", "--from", bad}, 2, "--from " + bad + ": migrate: the manifest has 0 NICs"},
		{[]string{"migrate", "incoming", "--vm", "x", "--from", "/nonexistent.json"}, 1, "migrate incoming: --from: open /nonexistent.json"},
		{[]string{"migrate", "incoming", "--vm", "x"}, 2, "--from is required"},
		{[]string{"migrate", "incoming", "--vm", "x", "--from", probe}, 2, "not a manifest"},
		{[]string{"attach", "--vm", "x", "--id", "n1", "--plan", bad}, 2, "--plan " + bad + ": policy: the plan names no hosts or no offer"},
		{[]string{"attach", "--vm", "x", "--id", "n1", "--plan", "/nonexistent.json"}, 1, "attach: --plan: open /nonexistent.json"},
		{[]string{"diagnose", "--from", "x", "--plan", probe}, 2, "the plan names no hosts or no offer"},
		{[]string{"migrate", "finish", "--vm", "nctl-no-such-vm"}, 1, "nctl-no-such-vm"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := execNetctl(t, bin, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, want %d\nstderr %q, want %q in it", r.code, tc.code, r.stderr, tc.stderr)
			}
		})
	}
}
