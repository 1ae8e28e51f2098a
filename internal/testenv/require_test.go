package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var errGone = errors.New("vduse: not available")

// TestRequireScenario is run by TestRequire in a child process, one
// scenario at a time; on its own it skips.
func TestRequireScenario(t *testing.T) {
	sc := os.Getenv("NETCTL_TESTENV_SCENARIO")
	if sc == "" {
		t.Skip("run by TestRequire in a child process")
	}
	probeRoot = os.Getenv("NETCTL_TESTENV_PROBE_ROOT")
	c := "vduse"
	var absent func(m *Missing)
	switch sc {
	case "checks-error":
		absent = func(m *Missing) { m.Err(errGone, nil, "not available") }
	case "wrong-error":
		absent = func(m *Missing) { m.Err(errors.New("EINVAL"), errGone) }
	case "no-error":
		absent = func(m *Missing) { m.Err(nil, errGone) }
	case "check-fails":
		absent = func(m *Missing) { m.Check(false, "report says %s", "available") }
	case "checks-nothing":
		absent = func(m *Missing) { m.Log("looked, asserted nothing") }
	case "nil":
	case "unknown":
		c = "vdusee"
	}
	Require(t, c, absent)
	t.Log("BODY RAN")
}

// TestRequire runs each scenario in a child test process and checks how
// the test is reported: no scenario may PASS having checked nothing.
func TestRequire(t *testing.T) {
	withNode, without := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(withNode, "dev/vduse"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withNode, "dev/vduse/control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const has, lacks = "tun,vduse,vhost_net", "tun,vhost_net"
	for _, c := range []struct {
		name, scenario, kernel, caps, root string
		want                               string // the parent test's verdict
		sub                                string // the subtest's verdict, "" for none
		body                               bool   // the test's body ran
		says                               string // in the output
	}{
		{"outside the VM", "checks-error", "", "", without, "SKIP", "", false, "needs the test VM"},
		{"has it and shows it", "nil", "6.12", has, withNode, "PASS", "", true, ""},
		{"has it, node missing", "checks-error", "6.12", has, without, "FAIL", "", false, "known to have vduse, but /dev/vduse/control is missing"},
		{"lacks it, error checked", "checks-error", "6.1", lacks, without, "SKIP", "PASS", false, "the subtest without_vduse checked"},
		{"lacks it, wrong error", "wrong-error", "6.1", lacks, without, "FAIL", "FAIL", false, "want an error that is vduse: not available"},
		{"lacks it, call succeeded", "no-error", "6.1", lacks, without, "FAIL", "FAIL", false, "yet the call succeeded"},
		{"lacks it, check fails", "check-fails", "6.1", lacks, without, "FAIL", "FAIL", false, "report says available"},
		{"lacks it, checks nothing", "checks-nothing", "6.1", lacks, without, "FAIL", "FAIL", false, "checked nothing"},
		{"lacks it, no check given", "nil", "6.1", lacks, without, "FAIL", "", false, "does not say what the code does there"},
		{"lacks it, but the node exists", "checks-error", "6.1", lacks, withNode, "FAIL", "", false, "correct the kernel's Caps"},
		{"unknown capability", "unknown", "6.12", has, withNode, "FAIL", "", false, `unknown capability "vdusee"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRequireScenario$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "NETCTL_TESTENV_SCENARIO="+c.scenario, "NETCTL_TESTENV_PROBE_ROOT="+c.root,
				"NETCTL_VM_KERNEL="+c.kernel, "NETCTL_VM_CAPS="+c.caps)
			b, _ := cmd.CombinedOutput()
			out := string(b)
			verdict := func(name string) string {
				m := regexp.MustCompile(`--- (PASS|FAIL|SKIP): ` + regexp.QuoteMeta(name) + ` `).FindStringSubmatch(out)
				if m == nil {
					return ""
				}
				return m[1]
			}
			if got := verdict("TestRequireScenario"); got != c.want {
				t.Errorf("test reported %q, want %q:\n%s", got, c.want, out)
			}
			if got := verdict("TestRequireScenario/without_vduse"); got != c.sub {
				t.Errorf("subtest reported %q, want %q:\n%s", got, c.sub, out)
			}
			if ran := strings.Contains(out, "BODY RAN"); ran != c.body {
				t.Errorf("body ran: %v, want %v:\n%s", ran, c.body, out)
			}
			if !strings.Contains(out, c.says) {
				t.Errorf("output does not say %q:\n%s", c.says, out)
			}
		})
	}
}
