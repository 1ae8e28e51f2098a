package probe

import (
	"os"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// FuzzParseQEMUVersion: `qemu-system-* --version` output is outside input.
// Seeds: Debian 12's QEMU 7.2 as captured (testdata/qemu-7.2-version.txt)
// and the shapes other builds print. No panic, allocation bounded by the
// input, a version is MAJOR.MINOR[.MICRO] of digits, and printing it back
// as QEMU would parses to the same version.
func FuzzParseQEMUVersion(f *testing.F) {
	b, err := os.ReadFile("testdata/qemu-7.2-version.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	for _, s := range []string{
		"QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1)\nCopyright (c) 2003-2023 Fabrice Bellard and the QEMU Project developers\n",
		"QEMU emulator version 9.0.0\n", "QEMU emulator version 7.2\n", "qemu 7.2.0\n", "QEMU emulator version 7..2\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		var v string
		var err error
		fuzzalloc.Check(t, len(out), func() { v, err = ParseQEMUVersion(out) })
		if err != nil {
			if v != "" || len(err.Error()) > 1000 {
				t.Fatalf("%q: %q with error %v", out, v, err)
			}
			return
		}
		parts := strings.Split(v, ".")
		if len(parts) < 2 || len(parts) > 3 || strings.Trim(v, "0123456789.") != "" {
			t.Fatalf("%q: version %q", out, v)
		}
		again, err := ParseQEMUVersion("QEMU emulator version " + v + " (netctl)\n")
		if err != nil || again != v {
			t.Fatalf("%q -> %q -> %q, %v", out, v, again, err)
		}
	})
}
