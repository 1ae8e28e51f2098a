package l2guest

import (
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

func TestParseRecvReply(t *testing.T) {
	if n, ns, err := ParseRecvReply("ok 1048576 2000000000"); err != nil || n != 1048576 || ns != 2000000000 {
		t.Fatalf("got %d %d %v", n, ns, err)
	}
	for _, bad := range []string{"ok", "ok 0 5", "ok 5 0", "ok -1 5", "err x", "ok 1 2 3", "ok 9999999999999999999 1"} {
		if _, _, err := ParseRecvReply(bad); err == nil {
			t.Errorf("ParseRecvReply(%q) accepted", bad)
		}
	}
}

// FuzzParseRecvReply: the agent's answer never panics the parser, and
// what it accepts is positive.
func FuzzParseRecvReply(f *testing.F) {
	for _, s := range []string{"ok 1048576 2000000000", "ok 0 5", "err no", "ok 999999999999999999 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var n, ns int64
		var err error
		fuzzalloc.Check(t, len(line), func() { n, ns, err = ParseRecvReply(line) })
		if err == nil && (n <= 0 || ns <= 0) {
			t.Fatalf("accepted %q as %d bytes in %d ns", line, n, ns)
		}
	})
}

// TestInit: each bench's addresses land on the MAC they belong to and no
// placeholder is left in the script.
func TestInit(t *testing.T) {
	s := string(Init("10.93.0.2/24", "10.94.0.2/24"))
	for _, want := range []string{`*:01) ip addr add 10.93.0.2/24 dev "$n";;`, `*:02) ip addr add 10.94.0.2/24 dev "$n";;`, "#!/bin/busybox sh\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("init has no %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "@ADDR") {
		t.Errorf("a placeholder is left:\n%s", s)
	}
}
