package host

import (
	"errors"
	"strings"
	"testing"
)

// TestParseQEMUVersion: plan decides which QEMU properties a host has by
// its qemu.version; a version that does not read as MAJOR.MINOR[.MICRO]
// would pass as "unknown" without a word, and plan would then print
// properties (guest_uso4=off) that an old QEMU refuses to start with. Such
// a document is refused, naming the field.
func TestParseQEMUVersion(t *testing.T) {
	doc := func(v string) []byte {
		return []byte(`{"schema":"netctl.probe/v1","hostname":"h","kernel":"6.1","qemu":{"version":"` + v + `"}}`)
	}
	for _, v := range []string{"", "7.2.22", "8.2", "10.0.0"} {
		if _, err := Parse(doc(v)); err != nil {
			t.Errorf("qemu.version %q: %v", v, err)
		}
	}
	for _, v := range []string{"junk", "9", "+9.1", "7.2.22 (Debian)", "7..2", "7.2.", "1.2.3.4", "1234567.0"} {
		_, err := Parse(doc(v))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "qemu.version") || !strings.Contains(err.Error(), "MAJOR.MINOR[.MICRO]") {
			t.Errorf("qemu.version %q: %v, want ErrInvalid naming qemu.version and MAJOR.MINOR[.MICRO]", v, err)
		}
	}
}
