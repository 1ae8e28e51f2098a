// Command testcheck reads `go test -json` on stdin, prints what plain
// `go test` would (package results, and the output of failed tests), and
// fails the run when a test layer reports PASS without having tested:
//
//   - a test whose name matches -no-skip was skipped (make test-host: a
//     host test that skips under NETCTL_TEST_HOST=1 checked nothing);
//   - a package ran no test although its *_test.go files have Test or Fuzz
//     functions that -run and -skip select ("ok ... [no tests to run]"
//     where tests were expected);
//   - with -skip-needs PREFIX (make test-vm: without_), a test matching
//     -no-skip may skip only after a subtest of it named PREFIX... passed:
//     testenv.Require's check of what the code does on a kernel that lacks
//     a capability. Any other skip in the VM checked nothing there.
//
// It also fails on any failed test or package, so `go test -json ... |
// testcheck` (with pipefail) replaces `go test ...` in the Makefile. At
// the end it lists the slowest top-level tests (-slowest N, default 10),
// for the work of keeping make test short.
//
//	go test -json -run '^TestHost' ./pkg | testcheck -run '^TestHost' -no-skip '^TestHost'
//	go test -json -exec 'netctl-vm exec' -run '^TestVM' ./pkg | testcheck -run '^TestVM' -no-skip '^TestVM' -skip-needs without_
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json output (cmd/test2json, go help test).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on pass, fail and skip
}

// timing is how long a top-level test took.
type timing struct {
	test    string // package and test
	elapsed float64
}

type pkgState struct {
	ran        int               // top-level tests that ran
	output     map[string]string // test -> its output so far
	skipped    map[string]string // test -> why
	checked    map[string]bool   // test -> a subtest of it named skipNeeds... passed
	started    []string          // tests in the order they began
	paused     map[string]bool   // tests waiting at t.Parallel
	said       []string          // the package's own output lines (not a test's), the first 10
	testFailed bool
	frozeAgain bool     // netctl-vm exec ran it again in a new VM
	frozeIn    []string // where the first run froze: "TEST: its last lines", for the note
	failed     bool
}

// failure is a failed test's first error lines, repeated at the end of the
// run: CI shows the tail of a long log, where a failed test's own output
// may have scrolled away behind later packages and its t.Log lines.
type failure struct {
	test  string
	lines []string
}

type checker struct {
	run, skip, noSkip *regexp.Regexp
	module, root      string // the module's path and directory
	skipNeeds         string // a skip is accepted after a passed subtest with this prefix ("" = never)
	out               io.Writer
	pkgs              map[string]*pkgState
	order             []string
	problems          []string
	failures          []failure
	timings           []timing
	slowest           int // how many of the slowest tests finish lists
}

func main() {
	runRe := flag.String("run", "", "the -run given to go test: which top-level tests were meant to run")
	skipRe := flag.String("skip", "", "the -skip given to go test")
	noSkip := flag.String("no-skip", "", "fail if a test matching this was skipped")
	skipNeeds := flag.String("skip-needs", "", "accept a -no-skip test's skip after a subtest of it whose name starts with this passed (the VM layer: without_)")
	slowest := flag.Int("slowest", 10, "list this many of the slowest top-level tests at the end (0: none)")
	flag.Parse()
	c := &checker{out: os.Stdout, pkgs: map[string]*pkgState{}, skipNeeds: *skipNeeds, slowest: *slowest}
	var err error
	if c.run, err = compile(*runRe); err == nil {
		if c.skip, err = compile(*skipRe); err == nil {
			c.noSkip, err = compile(*noSkip)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcheck:", err)
		os.Exit(2)
	}
	if c.module, c.root, err = findModule(); err != nil {
		fmt.Fprintln(os.Stderr, "testcheck:", err)
		os.Exit(2)
	}
	if err := c.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testcheck:", err)
		os.Exit(2)
	}
	if !c.finish() {
		os.Exit(1)
	}
}

func compile(s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	return regexp.Compile(s)
}

// findModule reads the module path from go.mod in the current directory
// or above.
func findModule() (path, dir string, err error) {
	dir, err = os.Getwd()
	if err != nil {
		return "", "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
					return f[1], dir, nil
				}
			}
			return "", "", fmt.Errorf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("no go.mod here or above")
		}
		dir = parent
	}
}

func (c *checker) pkg(name string) *pkgState {
	p := c.pkgs[name]
	if p == nil {
		p = &pkgState{output: map[string]string{}, skipped: map[string]string{}, checked: map[string]bool{}, paused: map[string]bool{}}
		c.pkgs[name] = p
		c.order = append(c.order, name)
	}
	return p
}

func (c *checker) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(c.out, string(line)) // not test2json: pass it on
			continue
		}
		c.event(e)
	}
	return sc.Err()
}

func (c *checker) event(e event) {
	if e.Package == "" {
		fmt.Fprint(c.out, e.Output)
		return
	}
	p := c.pkg(e.Package)
	if strings.Contains(e.Output, frozeAgain) {
		c.froze(p)
	}
	if e.Test == "" {
		switch e.Action {
		case "output", "build-output":
			switch {
			case e.Output == "PASS\n", e.Output == "testing: warning: no tests to run\n", strings.HasPrefix(e.Output, "=== "):
			case strings.HasSuffix(e.Output, "[no tests to run]\n") && p.ran == 0:
				// Not "ok": nothing was tested here. finish fails
				// the run if tests of this layer were expected.
				fmt.Fprintf(c.out, "-   \t%s\t[no tests of this layer]\n", e.Package)
			default:
				fmt.Fprint(c.out, e.Output)
				if l := strings.TrimSpace(e.Output); l != "" && l != "FAIL" && !strings.HasPrefix(l, "FAIL\t") && len(p.said) < 10 {
					p.said = append(p.said, l)
				}
			}
		case "fail", "build-fail":
			p.failed = true
			n := len(c.failures)
			c.unfinished(e.Package, p)
			if n == len(c.failures) && !p.testFailed {
				// No test failed or died: the binary, its VM or the
				// build did, and said so (if at all) at package level.
				c.failures = append(c.failures, failure{e.Package + " failed with no test failing (the build, the test binary's exit or its VM)", p.said})
			}
		}
		return
	}
	top := !strings.Contains(e.Test, "/")
	if top && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
		c.timings = append(c.timings, timing{e.Package + " " + e.Test, e.Elapsed})
	}
	switch e.Action {
	case "run":
		if top {
			p.ran++
		}
		p.started = append(p.started, e.Test)
	case "pause":
		p.paused[e.Test] = true
	case "cont":
		delete(p.paused, e.Test)
	case "output":
		p.output[e.Test] += e.Output
	case "skip":
		p.skipped[e.Test] = skipReason(p.output[e.Test])
		delete(p.output, e.Test)
	case "fail":
		p.failed = true
		p.testFailed = true
		fmt.Fprint(c.out, p.output[e.Test])
		c.failures = append(c.failures, failure{e.Package + " " + e.Test, errorLines(p.output[e.Test])})
		delete(p.output, e.Test)
	case "pass":
		delete(p.output, e.Test)
		if i := strings.LastIndex(e.Test, "/"); i > 0 && c.skipNeeds != "" && strings.HasPrefix(e.Test[i+1:], c.skipNeeds) {
			p.checked[e.Test[:i]] = true
		}
	}
}

// running lists a package's innermost running tests, in the order they
// began: started, not ended, not paused at t.Parallel, and with no running
// subtest (that one is named instead).
func (p *pkgState) running() []string {
	live := func(t string) bool {
		_, ok := p.output[t]
		return ok && !p.paused[t]
	}
	var r []string
	seen := map[string]bool{}
	for _, t := range p.started {
		if seen[t] || !live(t) {
			continue
		}
		seen[t] = true
		inner := false
		for _, u := range p.started {
			inner = inner || strings.HasPrefix(u, t+"/") && live(u)
		}
		if !inner {
			r = append(r, t)
		}
	}
	return r
}

// lastLines are a test's last 10 output lines but the === headers, each
// cut at 300 bytes.
func lastLines(out string) []string {
	var last []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== ") {
			last = append(last, l)
		}
	}
	if len(last) > 10 {
		last = last[len(last)-10:]
	}
	for i, l := range last {
		last[i] = clip(l)
	}
	return last
}

// clip cuts a line at 300 bytes.
func clip(l string) string {
	if len(l) > 300 {
		return l[:300] + "..."
	}
	return l
}

// forget drops the output of every test that began and did not end.
func (p *pkgState) forget() {
	for _, t := range p.started {
		delete(p.output, t)
	}
	p.started = nil
}

// unfinished prints, when a package fails, the output of its tests that
// started and never ended: the test binary (or the VM it ran in) died
// mid-test, and test2json put its last words in that test's output. The
// innermost running tests are named.
func (c *checker) unfinished(pkg string, p *pkgState) {
	printed := map[string]bool{}
	for _, t := range p.started {
		if out, ok := p.output[t]; ok && !p.paused[t] && !printed[t] {
			printed[t] = true
			fmt.Fprint(c.out, out)
		}
	}
	for _, t := range p.running() {
		c.failures = append(c.failures, failure{pkg + " " + t + " did not finish (the test binary, or the VM it ran in, ended mid-test)", lastLines(p.output[t])})
	}
	p.forget()
}

// froze: netctl-vm exec says the package's VM froze and it runs the test
// binary again. What the first run's running tests said so far (an error
// logged before the freeze among it) is kept for the note, and the second
// run starts afresh. It is called before the event carrying the line is
// added to any test's output.
func (c *checker) froze(p *pkgState) {
	p.frozeAgain = true
	for _, t := range p.running() {
		p.frozeIn = append(p.frozeIn, t+":")
		for _, l := range lastLines(p.output[t]) {
			p.frozeIn = append(p.frozeIn, "    "+l)
		}
	}
	if len(p.frozeIn) == 0 {
		p.frozeIn = []string{"(no test was running)"}
	}
	p.forget()
}

// frozeAgain starts the line netctl-vm exec prints when a test binary's VM
// froze and it runs the binary again (test/cmd/netctl-vm).
const frozeAgain = "netctl-vm: the guest froze; running the test binary again"

// errorLines picks from a failed test's output the lines that a t.Error,
// t.Fatal (or t.Log) began, file:line first, and keeps at most 10 of
// them, each cut at 300 bytes.
func errorLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if i := strings.Index(t, "_test.go:"); i <= 0 || strings.ContainsAny(t[:i], " \t") {
			continue
		}
		if lines = append(lines, clip(t)); len(lines) == 10 {
			break
		}
	}
	return lines
}

// skipReason is the t.Skip message in a skipped test's output.
func skipReason(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}

// finish reports the problems; false means the run must fail.
func (c *checker) finish() bool {
	ok := true
	var skips []string
	for _, name := range c.order {
		p := c.pkgs[name]
		if p.failed {
			ok = false
		}
		tests := make([]string, 0, len(p.skipped))
		for t := range p.skipped {
			tests = append(tests, t)
		}
		sort.Strings(tests)
		for _, t := range tests {
			s := fmt.Sprintf("%s %s: %s", name, t, p.skipped[t])
			if c.noSkip != nil && c.noSkip.MatchString(t) && !p.checked[t] {
				c.problems = append(c.problems, "skipped, so it checked nothing: "+s)
			} else {
				skips = append(skips, s)
			}
		}
		if p.ran == 0 && !p.failed {
			want, err := c.expected(name)
			switch {
			case err != nil:
				c.problems = append(c.problems, fmt.Sprintf("%s: %v", name, err))
			case len(want) > 0:
				c.problems = append(c.problems, fmt.Sprintf("%s: no test ran, but %s should have", name, strings.Join(want, ", ")))
			}
		}
	}
	for _, s := range skips {
		fmt.Fprintln(c.out, "testcheck: skipped:", s)
	}
	for _, name := range c.order {
		if p := c.pkgs[name]; p.frozeAgain {
			fmt.Fprintf(c.out, "testcheck: note: %s: its VM froze (no heartbeat) and netctl-vm ran the package again in a new VM; the first run froze in:\n", name)
			for _, l := range p.frozeIn {
				fmt.Fprintln(c.out, "    "+l)
			}
		}
	}
	c.printSlowest()
	for _, f := range c.failures {
		fmt.Fprintln(c.out, "testcheck: FAIL:", f.test)
		for _, l := range f.lines {
			fmt.Fprintln(c.out, "    "+l)
		}
	}
	for _, pr := range c.problems {
		fmt.Fprintln(c.out, "testcheck: FAIL:", pr)
	}
	return ok && len(c.problems) == 0
}

// expected lists the Test and Fuzz functions of a package's test files
// that -run and -skip select.
func (c *checker) expected(pkg string) ([]string, error) {
	rel, ok := strings.CutPrefix(pkg, c.module)
	if !ok {
		return nil, nil // not this module's
	}
	dir := filepath.Join(c.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var want []string
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !isTest(fd.Name.Name) {
				continue
			}
			n := fd.Name.Name
			if (c.run == nil || c.run.MatchString(n)) && (c.skip == nil || !c.skip.MatchString(n)) {
				want = append(want, n)
			}
		}
	}
	return want, nil
}

// isTest: TestXxx or FuzzXxx as go test finds them (not TestMain).
func isTest(name string) bool {
	for _, p := range []string{"Test", "Fuzz"} {
		if rest, ok := strings.CutPrefix(name, p); ok && name != "TestMain" {
			if rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z') {
				return true
			}
		}
	}
	return false
}

// printSlowest lists the c.slowest longest top-level tests, longest first.
func (c *checker) printSlowest() {
	if c.slowest <= 0 || len(c.timings) == 0 {
		return
	}
	t := append([]timing(nil), c.timings...)
	sort.SliceStable(t, func(i, j int) bool { return t[i].elapsed > t[j].elapsed })
	t = t[:min(len(t), c.slowest)]
	fmt.Fprintf(c.out, "testcheck: the %d slowest tests:\n", len(t))
	for _, x := range t {
		fmt.Fprintf(c.out, "    %7.1fs %s\n", x.elapsed, x.test)
	}
}
