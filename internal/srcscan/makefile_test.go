package srcscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTestLayersRaceAndTestcheck: make test's unit and host layers run
// with -race and through testcheck, and the harness and VM layers through
// testcheck with their rules for skips (issue 10 §4): a change to the Makefile or to
// test/run-vm-tests.sh that drops one fails here.
func TestMakeTestLayersRaceAndTestcheck(t *testing.T) {
	root := Root(t)
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, c := range []struct {
		target string
		want   []string
	}{
		{"test", []string{"test-unit", "test-host", "test-harness", "test-vm"}},
		{"test-unit", []string{"go test", "-race", "-json", "| $(TESTCHECK)"}},
		{"test-host", []string{"go test", "-race", "-json", "| \\", "$(TESTCHECK)", "-no-skip '^TestHost'"}},
		{"test-harness", []string{"go test", "-json", "$(TESTCHECK)", "-no-skip '^TestHarness'"}},
		{"test-vm", []string{"$(TESTCHECK)", "TESTCHECK=$(TESTCHECK) bash test/run-vm-tests.sh"}},
	} {
		rule := recipe(mk, c.target)
		if rule == "" {
			t.Errorf("Makefile has no target %s", c.target)
			continue
		}
		rule = strings.ReplaceAll(rule, "$(GO)", "go")
		for _, w := range c.want {
			if !strings.Contains(rule, w) {
				t.Errorf("make %s does not have %q:\n%s", c.target, w, rule)
			}
		}
	}
	b, err = os.ReadFile(filepath.Join(root, "test", "run-vm-tests.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"-json", `"$TESTCHECK" -run '^TestVM' -no-skip '^TestVM' -skip-needs without_`, "pipefail"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("test/run-vm-tests.sh does not have %q", w)
		}
	}
}

// recipe returns a Makefile rule: its "target:" line (the first one that
// has a recipe or prerequisites) and the recipe lines after it.
func recipe(mk, target string) string {
	lines := strings.Split(mk, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, target+":") || strings.Contains(l, "export ") {
			continue
		}
		out := []string{l}
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "\t") {
				break
			}
			out = append(out, r)
		}
		return strings.Join(out, "\n")
	}
	return ""
}
