package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeModule makes a module example.com/m with package p whose test file
// holds the given functions.
func fakeModule(t *testing.T, funcs ...string) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "p"), 0o755)
	src := "package p\n\nimport \"testing\"\n\n"
	for _, f := range funcs {
		src += "func " + f + "\n\n"
	}
	os.WriteFile(filepath.Join(dir, "p", "p_test.go"), []byte(src), 0o644)
	return dir
}

func check(t *testing.T, dir, run, skip, noSkip, events string) (bool, string) {
	t.Helper()
	var out bytes.Buffer
	c := &checker{out: &out, pkgs: map[string]*pkgState{}, module: "example.com/m", root: dir}
	c.run, _ = compile(run)
	c.skip, _ = compile(skip)
	c.noSkip, _ = compile(noSkip)
	if err := c.read(strings.NewReader(events)); err != nil {
		t.Fatal(err)
	}
	return c.finish(), out.String()
}

const (
	hostSkipped = `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestHostTap"}
{"Action":"output","Package":"example.com/m/p","Test":"TestHostTap","Output":"=== RUN   TestHostTap\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestHostTap","Output":"    tap_test.go:12: needs /dev/net/tun\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestHostTap","Output":"--- SKIP: TestHostTap (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/p","Test":"TestHostTap"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t0.01s\n"}
{"Action":"pass","Package":"example.com/m/p"}
`
	noneRan = `{"Action":"start","Package":"example.com/m/p"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t0.01s [no tests to run]\n"}
{"Action":"pass","Package":"example.com/m/p"}
`
	failed = `{"Action":"run","Package":"example.com/m/p","Test":"TestA"}
{"Action":"output","Package":"example.com/m/p","Test":"TestA","Output":"    a_test.go:3: boom\n"}
{"Action":"fail","Package":"example.com/m/p","Test":"TestA"}
{"Action":"output","Package":"example.com/m/p","Output":"FAIL\texample.com/m/p\t0.01s\n"}
{"Action":"fail","Package":"example.com/m/p"}
`
)

func TestSkippedHostTestFails(t *testing.T) {
	dir := fakeModule(t, "TestHostTap(t *testing.T) {}")
	ok, out := check(t, dir, "^TestHost", "", "^TestHost", hostSkipped)
	if ok || !strings.Contains(out, "TestHostTap: tap_test.go:12: needs /dev/net/tun") || !strings.Contains(out, "checked nothing") {
		t.Errorf("a skipped host test passed: %v\n%s", ok, out)
	}
	// Without -no-skip (the unit layer) a skip is listed, not failed.
	ok, out = check(t, dir, "^TestHost", "", "", hostSkipped)
	if !ok || !strings.Contains(out, "skipped: example.com/m/p TestHostTap: tap_test.go:12: needs /dev/net/tun") {
		t.Errorf("unit layer: %v\n%s", ok, out)
	}
}

func TestNoTestsRanFails(t *testing.T) {
	dir := fakeModule(t, "TestHostTap(t *testing.T) {}", "TestParse(t *testing.T) {}", "FuzzParse(f *testing.F) {}", "TestMain(m *testing.M) {}", "Testify() {}")
	ok, out := check(t, dir, "", "^(TestHost|TestVM)", "", noneRan)
	if ok || !strings.Contains(out, "no test ran, but TestParse, FuzzParse should have") || strings.Contains(out, "ok  ") {
		t.Errorf("a package whose unit tests did not run passed: %v\n%s", ok, out)
	}
	// A package whose tests all belong to another layer may run none.
	dir = fakeModule(t, "TestHostTap(t *testing.T) {}", "TestVMRing(t *testing.T) {}")
	if ok, out := check(t, dir, "", "^(TestHost|TestVM)", "", noneRan); !ok {
		t.Errorf("host- and VM-only package in the unit layer failed:\n%s", out)
	}
}

func TestFailurePrinted(t *testing.T) {
	ok, out := check(t, fakeModule(t), "", "", "", failed)
	if ok || !strings.Contains(out, "boom") || !strings.Contains(out, "FAIL\texample.com/m/p") {
		t.Errorf("failure: %v\n%s", ok, out)
	}
	// The error is repeated last, where a log's tail shows it.
	if !strings.HasSuffix(out, "testcheck: FAIL: example.com/m/p TestA\n    a_test.go:3: boom\n") {
		t.Errorf("no failure summary at the end:\n%s", out)
	}
}

func TestIsTest(t *testing.T) {
	for n, want := range map[string]bool{"Test": true, "TestX": true, "Test_x": true, "Testify": false, "TestMain": false, "FuzzX": true, "Fuzzy": false, "BenchmarkX": false} {
		if isTest(n) != want {
			t.Errorf("isTest(%q) = %v", n, !want)
		}
	}
}

// vmEvents is a VM layer's output on a kernel without vDPA: TestVMProbe
// ran its check of the missing capability (testenv.Require's subtest
// without_vdpa) and then skipped; TestVMRing skipped having run nothing.
const vmEvents = `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMProbe"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMProbe/without_vdpa"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestVMProbe/without_vdpa"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMProbe","Output":"    require.go:99: kernel 6.1 lacks vdpa: the subtest without_vdpa checked what happens instead\n"}
{"Action":"skip","Package":"example.com/m/p","Test":"TestVMProbe"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMRing"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMRing/case"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMRing/case","Output":"    ring_vm_test.go:9: not on 6.1\n"}
{"Action":"skip","Package":"example.com/m/p","Test":"TestVMRing/case"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestVMRing"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t0.01s\n"}
{"Action":"pass","Package":"example.com/m/p"}
`

// TestSkipNeedsItsCheck: in the VM layer (make test-vm) a skipped test
// or subtest passes only when a subtest of it named without_<capability>
// passed first (testenv.Require's check of what the code does on a kernel
// without it); any other skip fails the run, as does a package whose
// TestVM tests did not run.
func TestSkipNeedsItsCheck(t *testing.T) {
	dir := fakeModule(t, "TestVMProbe(t *testing.T) {}", "TestVMRing(t *testing.T) {}")
	var out bytes.Buffer
	c := &checker{out: &out, pkgs: map[string]*pkgState{}, module: "example.com/m", root: dir, skipNeeds: "without_"}
	c.run, _ = compile("^TestVM")
	c.noSkip, _ = compile("^TestVM")
	if err := c.read(strings.NewReader(vmEvents)); err != nil {
		t.Fatal(err)
	}
	ok := c.finish()
	s := out.String()
	if ok || !strings.Contains(s, "TestVMRing/case: ring_vm_test.go:9: not on 6.1") || !strings.Contains(s, "checked nothing") {
		t.Errorf("a VM subtest that skipped having checked nothing passed: %v\n%s", ok, s)
	}
	if strings.Contains(s, "checked nothing: example.com/m/p TestVMProbe:") {
		t.Errorf("a VM test that checked the missing capability (without_vdpa passed) was failed:\n%s", s)
	}
	// Without its passing without_ subtest, the same skip fails.
	ev := strings.Replace(vmEvents, `{"Action":"pass","Package":"example.com/m/p","Test":"TestVMProbe/without_vdpa"}`,
		`{"Action":"fail","Package":"example.com/m/p","Test":"TestVMProbe/without_vdpa"}`, 1)
	out.Reset()
	c = &checker{out: &out, pkgs: map[string]*pkgState{}, module: "example.com/m", root: dir, skipNeeds: "without_"}
	c.run, _ = compile("^TestVM")
	c.noSkip, _ = compile("^TestVM")
	c.read(strings.NewReader(ev))
	if c.finish() || !strings.Contains(out.String(), "checked nothing: example.com/m/p TestVMProbe:") {
		t.Errorf("a skip whose without_ check failed was accepted:\n%s", out.String())
	}
	// A VM package that ran none of its TestVM tests fails.
	out.Reset()
	c = &checker{out: &out, pkgs: map[string]*pkgState{}, module: "example.com/m", root: dir, skipNeeds: "without_"}
	c.run, _ = compile("^TestVM")
	c.read(strings.NewReader(noneRan))
	if c.finish() || !strings.Contains(out.String(), "no test ran, but TestVMProbe, TestVMRing should have") {
		t.Errorf("a VM package that ran nothing passed:\n%s", out.String())
	}
}

func TestSlowestListed(t *testing.T) {
	dir := fakeModule(t, "TestA(t *testing.T) {}", "TestB(t *testing.T) {}", "TestC(t *testing.T) {}")
	var out bytes.Buffer
	c := &checker{out: &out, pkgs: map[string]*pkgState{}, module: "example.com/m", root: dir, slowest: 2}
	ev := `{"Action":"run","Package":"example.com/m/p","Test":"TestA"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestA","Elapsed":1.5}
{"Action":"run","Package":"example.com/m/p","Test":"TestB"}
{"Action":"run","Package":"example.com/m/p","Test":"TestB/sub"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB/sub","Elapsed":99}
{"Action":"pass","Package":"example.com/m/p","Test":"TestB","Elapsed":100.25}
{"Action":"run","Package":"example.com/m/p","Test":"TestC"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestC","Elapsed":0.1}
{"Action":"pass","Package":"example.com/m/p"}
`
	if err := c.read(strings.NewReader(ev)); err != nil {
		t.Fatal(err)
	}
	if !c.finish() {
		t.Fatalf("a passing run failed:\n%s", out.String())
	}
	want := "testcheck: the 2 slowest tests:\n      100.2s example.com/m/p TestB\n        1.5s example.com/m/p TestA\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

// A test binary that dies mid-test (a VM that froze or crashed, a panic
// test2json could not place) leaves a test with output and no end: a
// failed package must show that output, not just "FAIL".
func TestUnfinishedTestOutputPrinted(t *testing.T) {
	events := `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestVMA"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"=== RUN   TestVMA\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestVMA","Output":"netctl-vm: guest exited 2: kernel BUG at mm/x.c:1\n"}
{"Action":"output","Package":"example.com/m/p","Output":"FAIL\texample.com/m/p\t11.185s\n"}
{"Action":"fail","Package":"example.com/m/p","Elapsed":11.185}
`
	ok, out := check(t, fakeModule(t, "TestVMA(t *testing.T) {}"), "^TestVM", "", "", events)
	if ok {
		t.Fatalf("passed:\n%s", out)
	}
	for _, want := range []string{"kernel BUG at mm/x.c:1", "TestVMA did not finish"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
