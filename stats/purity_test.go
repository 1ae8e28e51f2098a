package stats

import (
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestRatePure: the rate math (rate.go) imports nothing that opens a
// device, a socket or a file.
func TestRatePure(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "rate.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Imports) == 0 {
		t.Fatal("rate.go: no imports read")
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "time" {
			t.Errorf("rate.go imports %s: the rate math must stay pure (time only)", p)
		}
	}
}
