package srcscan

import (
	"go/ast"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFuzzScriptFindsEveryTarget: make fuzz (test/fuzz.sh) finds its
// targets with grep; the Go parser finds every func FuzzXxx(*testing.F)
// in the module's test files. The two lists must be the same, so that no
// fuzz target is left out of make fuzz (issue 10 §3).
func TestFuzzScriptFindsEveryTarget(t *testing.T) {
	root := Root(t)
	var want []string
	Walk(t, Options{MinFiles: 100}, func(path string, _ *token.FileSet, f *ast.File) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !isFuzz(fd.Name.Name) {
				continue
			}
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			want = append(want, filepath.ToSlash(dir)+" "+fd.Name.Name)
		}
	})
	slices.Sort(want)
	cmd := exec.Command("bash", "test/fuzz.sh", "--list")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test/fuzz.sh --list: %v", err)
	}
	got := strings.Fields(strings.ReplaceAll(string(out), " ", "\x00"))
	for i := range got {
		got[i] = strings.ReplaceAll(got[i], "\x00", " ")
	}
	slices.Sort(got)
	if len(want) < 40 {
		t.Fatalf("the parser found only %d fuzz targets: %v", len(want), want)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("make fuzz would not run %s", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("make fuzz lists %s, which is no fuzz target", g)
		}
	}
}

// isFuzz: FuzzXxx as go test finds it.
func isFuzz(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	return ok && (rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z'))
}
