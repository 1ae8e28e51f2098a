package state

import (
	"regexp"
	"strings"
	"testing"
)

// The expressions the hand-written checks replace: each check must say
// what its expression says, for every input.
var (
	idRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,31}$`)
	netdevRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	uuidRE   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ifnameRE = regexp.MustCompile(`^[^/\s:]{1,15}$`)
)

func checkIdent(t *testing.T, s string) {
	t.Helper()
	for _, c := range []struct {
		name string
		got  bool
		re   *regexp.Regexp
	}{
		{"IsQEMUID(32)", IsQEMUID(s, 32), idRE},
		{"IsQEMUID(64)", IsQEMUID(s, 64), netdevRE},
		{"IsUUID", IsUUID(s), uuidRE},
		{"isIfname", isIfname(s), ifnameRE},
	} {
		if want := c.re.MatchString(s); c.got != want {
			t.Errorf("%s(%q) = %v, the expression %s says %v", c.name, s, c.got, c.re, want)
		}
	}
}

func identSamples() []string {
	return []string{"", "a", "A", "0", "_", "net0", "net-1.x_y", "-net", ".a", "a b", "a\n", "a\x00",
		strings.Repeat("a", 31), strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("b", 64), strings.Repeat("b", 65),
		"8d5c6f39-1b0e-4f4e-9a51-0c3b2d1e6f70", "8D5C6F39-1B0E-4F4E-9A51-0C3B2D1E6F70", "8d5c6f39-1b0e-4f4e-9a51-0c3b2d1e6f7",
		"8d5c6f39-1b0e-4f4e-9a51-0c3b2d1e6f70\n", "8d5c6f391b0e-4f4e-9a51-0c3b2d1e6f70-", "g d5c6f39-1b0e-4f4e-9a51-0c3b2d1e6f7",
		"eth0", "vnet12", "tap/x", "a:b", "a\tb", "a\vb", "a\fb", "a\rb", "a\u00a0b", "a\u2003b", "étaïé", "\xff", "\xff\xfe",
		strings.Repeat("é", 15), strings.Repeat("é", 16), strings.Repeat("\xff", 15), strings.Repeat("\xff", 16), ".", "..",
		"ÿ", "a\u0085", "日本語"}
}

func TestIdentChecksMatchTheirExpressions(t *testing.T) {
	for _, s := range identSamples() {
		checkIdent(t, s)
	}
}

func FuzzIdentChecks(f *testing.F) {
	for _, s := range identSamples() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkIdent(t, s) })
}
