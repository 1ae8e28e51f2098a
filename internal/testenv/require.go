package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Caps are the capability names a VM kernel can be known to have (the
// Cap* constants of test/vm; a test there keeps the two lists equal).
var Caps = []string{"macvtap", "tun", "tun_uso", "vdpa", "vduse", "veth", "vhost_net", "vhost_vdpa"}

// capProbes names, for the capabilities that have one, the file whose
// presence shows the capability in the running kernel. tun_uso has none:
// only the tap's answer to TUNSETOFFLOAD shows it.
var capProbes = map[string]string{
	"tun":        "/dev/net/tun",
	"vhost_net":  "/dev/vhost-net",
	"vduse":      "/dev/vduse/control",
	"vdpa":       "/sys/bus/vdpa",
	"vhost_vdpa": "/sys/bus/vdpa/drivers/vhost_vdpa",
	"macvtap":    "/sys/module/macvtap",
	"veth":       "/sys/module/veth",
}

// probeRoot prefixes every probe path (set only by this package's tests).
var probeRoot = ""

// Require makes the calling VM test depend on capability c (one of Caps)
// and returns the VM's kernel. It is the way to write a test for something
// that not every kernel of the matrix has, such that no run of it can PASS
// having checked nothing:
//
//   - Outside the VM the test is skipped, as with VM.
//   - On a kernel known to have c, Require checks that the kernel shows it
//     (the device node or sysfs directory, where there is one) and fails
//     the test if not; then the rest of the test runs.
//   - On a kernel known to lack c, Require fails the test if the kernel
//     shows c after all (the matrix in test/vm is wrong); otherwise it runs
//     absent as the subtest "without_<c>", which must assert what the code
//     under test does there (the clear error) through Missing.Err or
//     Missing.Check at least once, and then ends the test with t.SkipNow:
//     the rest of the test never runs, the subtest is reported as PASS
//     (or FAIL), and the test itself as SKIP (or FAIL).
//   - absent may be nil only while every kernel of the matrix has c: on a
//     kernel without c, a nil absent fails the test ("say what the code
//     does without c").
//
// Call Require before Host: it runs a subtest, and a subtest runs on
// another thread, outside the namespaces Host makes (absent may call Host
// itself).
func Require(t *testing.T, c string, absent func(m *Missing)) *Kernel {
	t.Helper()
	if !slices.Contains(Caps, c) {
		t.Fatalf("testenv.Require: unknown capability %q: use one of %s", c, strings.Join(Caps, ", "))
	}
	k := VM(t)
	probe, hasProbe := capProbes[c]
	var shown bool
	if hasProbe {
		_, err := os.Stat(filepath.Join(probeRoot, probe))
		shown = err == nil
	}
	if k.Has(c) {
		if hasProbe && !shown {
			t.Fatalf("kernel %s is known to have %s, but %s is missing: a module failed to load (see the VM's console) or the image is stale", k.Name, c, probe)
		}
		return k
	}
	if hasProbe && shown {
		t.Fatalf("kernel %s is known to lack %s, yet %s exists: correct the kernel's Caps in test/vm/kernels.go", k.Name, c, probe)
	}
	if absent == nil {
		t.Fatalf("kernel %s lacks %s and the test does not say what the code does there: pass testenv.Require a function that asserts the error", k.Name, c)
	}
	t.Run("without_"+c, func(st *testing.T) {
		m := &Missing{T: st, kernel: k, c: c}
		absent(m)
		if m.checks == 0 && !st.Failed() {
			st.Fatalf("kernel %s lacks %s, and the check of what happens there checked nothing: call Missing.Err or Missing.Check", k.Name, c)
		}
	})
	t.Skipf("kernel %s lacks %s: the subtest without_%s checked what happens instead; the rest needs %s", k.Name, c, c, c)
	return nil // not reached: SkipNow ends the test
}

// Missing is what Require hands the check for a kernel without the
// capability: the subtest's T, and assertions that count, so that a check
// that asserts nothing fails.
type Missing struct {
	*testing.T
	kernel *Kernel
	c      string
	checks int
}

// Kernel is the kernel that lacks the capability.
func (m *Missing) Kernel() *Kernel { return m.kernel }

// Err asserts that err is the clear error the code gives without the
// capability: not nil, errors.Is(err, target) when target is not nil, and
// a message that contains each of words.
func (m *Missing) Err(err, target error, words ...string) {
	m.Helper()
	m.checks++
	what := fmt.Sprintf("kernel %s lacks %s", m.kernel.Name, m.c)
	if err == nil {
		m.Errorf("%s, yet the call succeeded: want an error", what)
		return
	}
	if target != nil && !errors.Is(err, target) {
		m.Errorf("%s: got %v, want an error that is %v", what, err, target)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			m.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

// Check asserts ok, for a behaviour that is not an error (a report that
// says the capability is missing, a zero count): when ok is false the
// subtest fails with the message.
func (m *Missing) Check(ok bool, format string, args ...any) {
	m.Helper()
	m.checks++
	if !ok {
		m.Errorf("kernel %s lacks %s: "+format, append([]any{m.kernel.Name, m.c}, args...)...)
	}
}
