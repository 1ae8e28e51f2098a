package lazyre

import (
	"sync"
	"testing"
)

func TestCompiledOnceOnFirstUse(t *testing.T) {
	r := New(`^a(b+)$`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.MatchString("abb") || r.MatchString("ac") {
				t.Error("wrong match")
			}
		}()
	}
	wg.Wait()
	first := r.Regexp()
	if second := r.Regexp(); first != second {
		t.Fatal("compiled twice")
	}
	if got := r.ReplaceAllString("abbb", "x"); got != "x" {
		t.Fatalf("ReplaceAllString = %q", got)
	}
	if got := r.FindStringSubmatchIndex("abb"); len(got) != 4 || got[2] != 1 || got[3] != 3 {
		t.Fatalf("FindStringSubmatchIndex = %v", got)
	}
	if r.String() != `^a(b+)$` {
		t.Fatal(r.String())
	}
}

func TestBadPatternPanicsAtUse(t *testing.T) {
	r := New(`(`) // no panic here
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic at first use")
		}
	}()
	r.MatchString("x")
}
