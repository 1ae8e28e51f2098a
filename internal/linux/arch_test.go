package linux

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// typeCheck type-checks the package as go/build selects its files for
// goos/goarch, and returns the type errors.
func typeCheck(t *testing.T, goos, goarch string) (*types.Package, []error) {
	t.Helper()
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = goos, goarch, false
	bp, err := ctx.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	stdOnce.Do(func() { stdFset = token.NewFileSet(); stdImporter = importer.ForCompiler(stdFset, "source", nil) })
	var files []*ast.File
	for _, m := range bp.GoFiles {
		f, err := parser.ParseFile(stdFset, m, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var errs []error
	conf := types.Config{
		Sizes: types.SizesFor("gc", goarch),
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if path == "unsafe" || !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") {
				return stdImporter.Import(path)
			}
			p := types.NewPackage(path, filepath.Base(path))
			p.MarkComplete()
			return p, nil
		}),
		Error: func(err error) { errs = append(errs, err) },
	}
	pkg, _ := conf.Check("github.com/netctl/netctl/internal/linux", stdFset, files, nil)
	return pkg, errs
}

// The standard library, imported from source once for every type check.
var (
	stdOnce     sync.Once
	stdFset     *token.FileSet
	stdImporter types.Importer
)

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// TestBuildsOnlyForAmd64AndArm64: the package builds for linux/amd64 and
// linux/arm64 and refuses, with a line that says why, every other target,
// whose ioctl encoding or struct layouts netctl has not checked (powerpc
// and mips encode ioctls differently; 386 aligns __u64 to 4). make lint
// also cross-builds the whole module for arm64.
func TestBuildsOnlyForAmd64AndArm64(t *testing.T) {
	const refusal = "undefined: netctl_builds_only_for_linux_amd64_and_arm64"
	refused := func(errs []error) bool {
		for _, err := range errs {
			if strings.Contains(err.Error(), refusal) {
				return true
			}
		}
		return false
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if _, errs := typeCheck(t, "linux", arch); refused(errs) {
			t.Errorf("linux/%s is refused", arch)
		}
	}
	for _, target := range [][2]string{{"linux", "386"}, {"linux", "ppc64le"}, {"linux", "mips64le"}, {"linux", "riscv64"}, {"freebsd", "amd64"}} {
		if _, errs := typeCheck(t, target[0], target[1]); !refused(errs) {
			t.Errorf("%s/%s: no build-constraint refusal (want %q) among its %d type errors: arch_unsupported.go must "+
				"stop every target but linux/amd64 and linux/arm64", target[0], target[1], refusal, len(errs))
		}
	}
}
