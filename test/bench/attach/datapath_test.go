package main

import "testing"

func TestParseRecvReply(t *testing.T) {
	if n, ns, err := parseRecvReply("ok 1048576 2000000000"); err != nil || n != 1048576 || ns != 2000000000 {
		t.Fatalf("got %d %d %v", n, ns, err)
	}
	for _, bad := range []string{"ok", "ok 0 5", "ok 5 0", "ok -1 5", "err x", "ok 1 2 3", "ok 9999999999999999999 1"} {
		if _, _, err := parseRecvReply(bad); err == nil {
			t.Errorf("parseRecvReply(%q) accepted", bad)
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
		n, ns, err := parseRecvReply(line)
		if err == nil && (n <= 0 || ns <= 0) {
			t.Fatalf("accepted %q as %d bytes in %d ns", line, n, ns)
		}
	})
}
