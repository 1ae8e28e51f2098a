package lazyre

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
)

// TestEveryPatternCompiles compiles every lazyre.New pattern of the tree
// here, since the program compiles each only when first used.
func TestEveryPatternCompiles(t *testing.T) {
	n := 0
	srcscan.Walk(t, srcscan.Options{MinFiles: 100}, func(path string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(x ast.Node) bool {
			call, ok := x.(*ast.CallExpr)
			if !ok || !srcscan.IsSel(call.Fun, "lazyre", "New") || len(call.Args) != 1 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: lazyre.New takes a string literal, so that this test can compile it", fset.Position(call.Pos()))
				return true
			}
			pat, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := regexp.Compile(pat); err != nil {
				t.Errorf("%s: %v", fset.Position(call.Pos()), err)
			}
			n++
			return true
		})
	})
	if n < 5 {
		t.Fatalf("found only %d lazyre.New patterns", n)
	}
}

// TestNoRegexpCompiledAtInit holds product code to compiling no regular
// expression at package initialisation (a package-level regexp.MustCompile
// costs every netctl call, used or not): use lazyre.New.
func TestNoRegexpCompiledAtInit(t *testing.T) {
	testDir := filepath.Join(srcscan.Root(t), "test") + string(filepath.Separator)
	srcscan.Walk(t, srcscan.Options{SkipTests: true, MinFiles: 100}, func(path string, fset *token.FileSet, f *ast.File) {
		if strings.HasPrefix(path, testDir) {
			return // test programs, not netctl
		}
		for _, d := range f.Decls {
			// A package-level var's initialiser, or the body of an init
			// function: both run before main.
			var at ast.Node
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok == token.VAR {
					at = d
				}
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					at = d.Body
				}
			}
			if at == nil {
				continue
			}
			ast.Inspect(at, func(x ast.Node) bool {
				if _, ok := x.(*ast.FuncLit); ok {
					return false // compiled when called, not at init
				}
				if call, ok := x.(*ast.CallExpr); ok && (srcscan.IsSel(call.Fun, "regexp", "MustCompile") || srcscan.IsSel(call.Fun, "regexp", "Compile")) {
					t.Errorf("%s: a regular expression compiled at package init: use lazyre.New", fset.Position(call.Pos()))
				}
				return true
			})
		}
	})
}
